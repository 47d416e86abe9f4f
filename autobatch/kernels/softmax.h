/* The loops of softmax, log_softmax and pickneglogsoftmax over one column of n
 * contiguous floats (kernels/softmax.pyx calls them per column), in C so that GCC
 * vectorises them, each with AVX2 and AVX-512 clones (AB_LOOP).
 *
 * Sums have sixteen partial sums (one 512-bit register), so they vectorise and are
 * not one chain of dependent additions. A column is read twice in a forward: once
 * for its maximum, once for the exps (the second time from cache). */
#ifndef AUTOBATCH_SOFTMAX_H
#define AUTOBATCH_SOFTMAX_H
#include "elementwise.h"

#define AB_LANES 16
#define AB_TILE 1024            /* exps of a column not stored: a tile on the stack (4 KB) */

/* the largest of x[0..n-1]. GCC vectorises a running maximum of floats only when it
 * may ignore NaNs and the sign of zero; here neither matters: a NaN in x makes the
 * column's exp sum NaN whatever the maximum is, and max(-0, +0) shifts by zero. */
AB_LOOP __attribute__((optimize("finite-math-only", "no-signed-zeros")))
static float ab_col_max(const float* restrict x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

/* sum of exp(x - mx); with y != NULL the exps are stored there too (softmax). The
 * exps of a tile are computed by one loop and summed by another: each vectorises
 * alone, and the tile is still in L1 when the second reads it. */
AB_LOOP static double ab_col_sum_exp(float* restrict y, const float* restrict x, int n, float mx) {
    float tile[AB_TILE];
    float acc[AB_LANES] = {0};
    double s = 0;
    for (int at = 0; at < n; at += AB_TILE) {
        const int len = n - at < AB_TILE ? n - at : AB_TILE;
        float* restrict e = y != NULL ? y + at : tile;
        for (int i = 0; i < len; i++)
            e[i] = ab_exp_nonpos(x[at + i] - mx);
        int i = 0;
        for (; i + AB_LANES <= len; i += AB_LANES)
            for (int k = 0; k < AB_LANES; k++)
                acc[k] += e[i + k];
        for (; i < len; i++)        /* the last tile's tail */
            s += e[i];
    }
    for (int k = 0; k < AB_LANES; k++)
        s += acc[k];
    return s;
}

/* softmax: y = y / s (y holds the exps); log_softmax: y = x - mx - ls */
AB_LOOP static void ab_col_divide(float* restrict y, int n, float s) {
    for (int i = 0; i < n; i++)
        y[i] = y[i] / s;
}

AB_LOOP static void ab_col_log_softmax(float* restrict y, const float* restrict x, int n,
                                       float mx, float ls) {
    for (int i = 0; i < n; i++)
        y[i] = x[i] - mx - ls;
}

/* dx = (add: +=) exp(x - mx) * scale: the softmax of a column, from its maximum mx
 * and scale = g / (its exp sum), times g (pickneglogsoftmax's backward, without the
 * -g of the picked row) */
AB_LOOP static void ab_col_softmax_scaled(float* restrict dx, const float* restrict x, int n,
                                          float mx, float scale, int add) {
    if (add)
        for (int i = 0; i < n; i++)
            dx[i] += ab_exp_nonpos(x[i] - mx) * scale;
    else
        for (int i = 0; i < n; i++)
            dx[i] = ab_exp_nonpos(x[i] - mx) * scale;
}

/* sum of dy (y == NULL) or of dy * y, in double partial sums */
AB_LOOP static double ab_col_dot(const float* restrict dy, const float* restrict y, int n) {
    double acc[AB_LANES] = {0};
    int i = 0;
    if (y == NULL)
        for (; i + AB_LANES <= n; i += AB_LANES)
            for (int k = 0; k < AB_LANES; k++)
                acc[k] += dy[i + k];
    else
        for (; i + AB_LANES <= n; i += AB_LANES)
            for (int k = 0; k < AB_LANES; k++)
                acc[k] += dy[i + k] * y[i + k];
    double s = 0;
    for (int k = 0; k < AB_LANES; k++)
        s += acc[k];
    for (; i < n; i++)
        s += y == NULL ? dy[i] : dy[i] * y[i];
    return s;
}

/* backward of a column, s from ab_col_dot: softmax dx (+)= y (dy - s), log_softmax
 * (y the log-probabilities) dx (+)= dy - exp(y) s */
AB_LOOP static void ab_col_softmax_bwd(float* restrict dx, const float* restrict y,
                                       const float* restrict dy, int n, float s, int logp,
                                       int add) {
    if (logp && add)
        for (int i = 0; i < n; i++)
            dx[i] += dy[i] - ab_exp_nonpos(y[i]) * s;
    else if (logp)
        for (int i = 0; i < n; i++)
            dx[i] = dy[i] - ab_exp_nonpos(y[i]) * s;
    else if (add)
        for (int i = 0; i < n; i++)
            dx[i] += y[i] * (dy[i] - s);
    else
        for (int i = 0; i < n; i++)
            dx[i] = y[i] * (dy[i] - s);
}
#endif
