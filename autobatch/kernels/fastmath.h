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

/* logistic, stable in both tails and accurate to about 1e-7 relative down to 1e-38
 * (its outputs feed log losses); vectorises. Uses ab_exp_nonpos, defined below. */
static inline float ab_exp_nonpos(float x);
static inline float ab_logistic(float x) {
    const float e = ab_exp_nonpos(-fabsf(x));
    return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

/* exp for x <= 0 (arguments shifted by their maximum: softmax, log-sum-exp). Cody-Waite
 * range reduction and Cephes' polynomial, max relative error about 2 ulp. Below -87.3
 * it returns 2^-126 (the smallest normal float) instead of a slow denormal or 0. */
static inline float ab_exp_nonpos(float x) {
    x = x < -87.3365447505531f ? -87.3365447505531f : x;
    x = x > 0.0f ? 0.0f : x;
    float n = x * 1.44269504088896341f;
    n = (n - 12582912.0f) + 12582912.0f;       /* round to nearest: 1.5 * 2^23 */
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    const float r2 = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r2 + r + 1.0f;
    const int bits = ((int)n + 127) << 23;
    float scale;
    __builtin_memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}
/* digamma, the derivative of lgamma, in double: the reflection formula below 1/2, the
 * recurrence psi(x) = psi(x + 1) - 1/x up to x >= 6, then the asymptotic series (error
 * below 1e-9 there). NaN at the poles 0, -1, -2, ... (lgamma's are +inf). */
static inline float ab_digamma(float xf) {
    double x = xf, r = 0.0;
    if (x <= 0.0 && x == floor(x))
        return NAN;
    if (x < 0.5) {                        /* psi(x) = psi(1 - x) - pi / tan(pi x) */
        r = -3.14159265358979323846 / tan(3.14159265358979323846 * x);
        x = 1.0 - x;
    }
    for (; x < 6.0; x += 1.0)
        r -= 1.0 / x;
    const double f = 1.0 / (x * x);
    const double t = f * (-1.0 / 12 + f * (1.0 / 120 + f * (-1.0 / 252 + f * (1.0 / 240
                     + f * (-1.0 / 132)))));
    return (float)(r + log(x) - 0.5 / x + t);
}

/* Maximum of n floats with eight independent partial results (the column loops of
 * kernels/softmax.h have their own, vectorised). */
static inline float ab_max(const float* x, int n) {
    float m = x[0];
    int i = 0;
    if (n >= 8) {
        float acc[8];
        for (int k = 0; k < 8; k++)
            acc[k] = x[k];
        for (i = 8; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++)
                acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
        for (int k = 0; k < 8; k++)
            m = acc[k] > m ? acc[k] : m;
    }
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}
#endif
