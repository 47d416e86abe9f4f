/* The products of the fused LSTM cell (kernels/recurrent.pyx): c = i g + sum_m f_m c_m
 * and its gradients are all y (+)= a b over a block of h, in C so that GCC vectorises
 * them, with AVX2 and AVX-512 clones (AB_LOOP). */
#ifndef AUTOBATCH_RECURRENT_H
#define AUTOBATCH_RECURRENT_H
#include "elementwise.h"

/* y = a b (set: the first write, no zeroing of y before) or y += a b */
AB_LOOP static void ab_mul_acc(float* restrict y, const float* restrict a, const float* restrict b,
                               int n, int set) {
    if (set)
        for (int i = 0; i < n; i++)
            y[i] = a[i] * b[i];
    else
        for (int i = 0; i < n; i++)
            y[i] += a[i] * b[i];
}
#endif
