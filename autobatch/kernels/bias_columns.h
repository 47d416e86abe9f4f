/* A bias's loops over the columns of a matrix (affine_transform, kernels/products.pyx):
 * one column repeated into many (forward) and many summed into one (its gradient), in
 * C so that GCC vectorises them, with AVX2 and AVX-512 clones (AB_LOOP). */
#ifndef AUTOBATCH_COLUMNS_H
#define AUTOBATCH_COLUMNS_H
#include <string.h>
#include "elementwise.h"

/* y[c n + i] = x[i] for the ncols columns of y */
AB_LOOP static void ab_repeat_col(float* restrict y, const float* restrict x, int n, long ncols) {
    if (n >= 64) {                  /* long columns: libc's copy */
        for (long c = 0; c < ncols; c++)
            memcpy(y + c * (long)n, x, (size_t)n * sizeof(float));
        return;
    }
    for (long c = 0; c < ncols; c++)
        for (int i = 0; i < n; i++)
            y[c * (long)n + i] = x[i];
}

/* db[i] = (set) or += the sum over c of dy[c ld + i], i < n (ld >= n: a range of rows
 * of columns of ld). Added column after column, as one column at a time would (the
 * same numbers, bit for bit), but eight columns per pass, so db is read and written
 * once per eight columns instead of once each. */
AB_LOOP static void ab_sum_cols(float* restrict db, const float* restrict dy, int n, long ld,
                                long ncols, int set) {
    long c = 0;
    if (set && ncols > 0) {
        memcpy(db, dy, (size_t)n * sizeof(float));
        c = 1;
    } else if (set) {
        memset(db, 0, (size_t)n * sizeof(float));
    }
    for (; c + 8 <= ncols; c += 8) {
        const float* restrict d = dy + c * ld;
        for (int i = 0; i < n; i++)
            db[i] = db[i] + d[i] + d[ld + i] + d[2 * ld + i] + d[3 * ld + i] + d[4 * ld + i]
                    + d[5 * ld + i] + d[6 * ld + i] + d[7 * ld + i];
    }
    for (; c < ncols; c++)
        for (int i = 0; i < n; i++)
            db[i] += dy[c * ld + i];
}
#endif
