/* Elementwise math for the kernels, written in C so that GCC if-converts the
 * selects and vectorises loops over them (Cython's generated if/else does not). */
#ifndef AUTOBATCH_FASTMATH_H
#define AUTOBATCH_FASTMATH_H
#include <math.h>

/* tanh by the rational approximation Eigen (hence DyNet) uses; max error 3.7e-7.
 * Below |x| = 4e-4, tanh(x) = x to float precision: the polynomial is evaluated at a
 * harmless point instead, because tiny x would make slow denormal intermediates. */
static inline float ab_fast_tanh(float x) {
    const float c = 7.99881172180175781f;
    const int small = fabsf(x) < 0.0004f;
    float xe = x > c ? c : x;
    xe = xe < -c ? -c : xe;
    xe = small ? 0.5f : xe;
    const float x2 = xe * xe;
    float p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
    p = x2 * p + -8.60467152213735e-11f;
    p = x2 * p + 5.12229709037114e-08f;
    p = x2 * p + 1.48572235717979e-05f;
    p = x2 * p + 6.37261928875436e-04f;
    p = x2 * p + 4.89352455891786e-03f;
    p = xe * p;
    float q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
    q = x2 * q + 2.26843463243900e-03f;
    q = x2 * q + 4.89352518554385e-03f;
    const float r = p / q;
    return small ? x : r;
}

/* logistic through tanh: absolute error < 2e-7, fine for gates (the logistic op
 * itself uses the exact form, whose tails feed log losses) */
static inline float ab_fast_logistic(float x) {
    return 0.5f + 0.5f * ab_fast_tanh(0.5f * x);
}
#endif
