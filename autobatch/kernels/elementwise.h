/* Elementwise ops, one line each: forward value and derivative side by side.
 *
 * Unary:  X input, Y output, A the op's constant (alpha, the scalar of x * c, ...).
 *         FWD computes Y from X; DERIV is dY/dX.
 * Binary: X, Y inputs, Z output. FWD computes Z; DX and DY are dZ/dX and dZ/dY.
 *
 * Each line expands into whole-array loop functions that GCC vectorises; the kernels
 * in kernels/elementwise.pyx call them once per node (or once per batch when the inputs are
 * contiguous), so no function pointer is called per element. */
#ifndef AUTOBATCH_ELEMENTWISE_H
#define AUTOBATCH_ELEMENTWISE_H
#include <string.h>
#include "fastmath.h"

/* Each loop is also compiled for AVX2 and AVX-512 and the best the processor has is
 * picked when the module loads (the portable build alone has only SSE2). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(AB_NO_CLONES)
#define AB_LOOP __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define AB_LOOP
#endif

/* Which of the clones above the loader picked: the same test, in the same order, as
 * GCC's resolver for target_clones (reported by `python -m autobatch`). */
static inline const char* ab_simd_level(void) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(AB_NO_CLONES)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "avx512f";
    if (__builtin_cpu_supports("avx2")) return "avx2";
    return "default (sse2)";
#else
    return "portable (no target clones)";
#endif
}

#define SELU_L 1.0507009873554804934f
#define SELU_A 1.6732632423543772848f

/* Unary ops that are functions of the API: dy.NAME(x), or dy.NAME(x, ATTR=DEFAULT) when
 * the op has a constant A (ATTR _: none). A line here is the whole op: its id, record,
 * Python function and export are made from it when the module loads. */
#define AB_UNARY_OPS(OP)                                                                \
    OP(tanh,           _,     0.0f, ab_fast_tanh(X),         1.0f - Y * Y)              \
    OP(logistic,       _,     0.0f, ab_logistic(X),          Y * (1.0f - Y))            \
    OP(rectify,        _,     0.0f, X > 0.0f ? X : 0.0f,     X > 0.0f ? 1.0f : 0.0f)    \
    OP(elu,            alpha, 1.0f, X > 0.0f ? X : A * (expf(X) - 1.0f), X > 0.0f ? 1.0f : Y + A) \
    OP(selu,           _,     0.0f, SELU_L * (X > 0.0f ? X : SELU_A * (expf(X) - 1.0f)),  \
                                    X > 0.0f ? SELU_L : Y + SELU_L * SELU_A)            \
    OP(exp,            _,     0.0f, expf(X),                 Y)                         \
    OP(log,            _,     0.0f, logf(X),                 1.0f / X)                  \
    OP(sqrt,           _,     0.0f, sqrtf(X),                0.5f / Y)                  \
    OP(square,         _,     0.0f, X * X,                   2.0f * X)                  \
    OP(abs,            _,     0.0f, fabsf(X),                X > 0.0f ? 1.0f : (X < 0.0f ? -1.0f : 0.0f)) \
    OP(cube,           _,     0.0f, X * X * X,               3.0f * X * X)              \
    OP(softsign,       _,     0.0f, X / (1.0f + fabsf(X)),   1.0f / ((1.0f + fabsf(X)) * (1.0f + fabsf(X)))) \
    OP(log_sigmoid,    _,     0.0f, X >= 0.0f ? -log1pf(expf(-X)) : X - log1pf(expf(X)), 1.0f - expf(Y)) \
    OP(sin,            _,     0.0f, sinf(X),                 cosf(X))                   \
    OP(cos,            _,     0.0f, cosf(X),                 -sinf(X))                  \
    OP(erf,            _,     0.0f, erff(X),                 1.12837916709551257f * expf(-X * X)) \
    OP(tan,            _,     0.0f, tanf(X),                 1.0f + Y * Y)              \
    OP(asin,           _,     0.0f, asinf(X),                1.0f / sqrtf(1.0f - X * X)) \
    OP(acos,           _,     0.0f, acosf(X),                -1.0f / sqrtf(1.0f - X * X)) \
    OP(atan,           _,     0.0f, atanf(X),                1.0f / (1.0f + X * X))     \
    OP(sinh,           _,     0.0f, sinhf(X),                coshf(X))                  \
    OP(cosh,           _,     0.0f, coshf(X),                sinhf(X))                  \
    OP(asinh,          _,     0.0f, asinhf(X),               1.0f / sqrtf(X * X + 1.0f)) \
    OP(acosh,          _,     0.0f, acoshf(X),               1.0f / sqrtf(X * X - 1.0f)) \
    OP(atanh,          _,     0.0f, atanhf(X),               1.0f / (1.0f - X * X))     \
    OP(silu,           beta,  1.0f, X * ab_logistic(A * X),  ab_logistic(A * X) * (1.0f + A * X * (1.0f - ab_logistic(A * X)))) \
    OP(lgamma,         _,     0.0f, lgammaf(X),              ab_digamma(X))             \
    OP(scale_gradient, lambd, 1.0f, X,                       A)

/* Unary math used by other ops (operators, constants, the fused LSTM kernels). */
#define AB_UNARY_INTERNAL_OPS(OP)                                                   \
    OP(negate,          -X,                               -1.0f)                    \
    OP(add_constant,    X + A,                            1.0f)                     \
    OP(mul_constant,    X * A,                            A)                        \
    OP(constant_minus,  A - X,                            -1.0f)                    \
    OP(constant_divide, A / X,                            -Y / X)                   \
    OP(identity,        X,                                1.0f)                     \
    OP(gate_logistic,   ab_logistic(X + A),               Y * (1.0f - Y))  /* LSTM gates */ \
    /* rounding: A is 1 for DyNet's straight_through_gradient, 0 for zero_gradient */  \
    OP(round,           roundf(X),                        A)                        \
    OP(ceil,            ceilf(X),                         A)                        \
    OP(floor,           floorf(X),                        A)                        \
    /* -log Poisson(A; lambda = exp(X)) of the count A */                          \
    OP(poisson_loss,    expf(X) - A * X + lgammaf(A + 1.0f), expf(X) - A)

#define AB_BINARY_OPS(OP)                                                           \
    OP(add,       X + Y,        1.0f,                    1.0f)                      \
    OP(subtract,  X - Y,        1.0f,                    -1.0f)                     \
    OP(cmult,     X * Y,        Y,                       X)                         \
    OP(cdiv,      X / Y,        1.0f / Y,                -Z / Y)                    \
    OP(pow,       powf(X, Y),   Y * powf(X, Y - 1.0f),   Z * logf(X))               \
    /* DyNet's bmax/bmin: ties send the gradient to y */                             \
    OP(bmax,      X > Y ? X : Y, X > Y ? 1.0f : 0.0f,    X > Y ? 0.0f : 1.0f)       \
    OP(bmin,      X < Y ? X : Y, X < Y ? 1.0f : 0.0f,    X < Y ? 0.0f : 1.0f)       \
    OP(mul_tanh,  X * ab_fast_tanh(Y), ab_fast_tanh(Y),                                 \
                  X * (1.0f - ab_fast_tanh(Y) * ab_fast_tanh(Y)))  /* LSTM: o * tanh(c) */

typedef void (*ab_unary_fwd)(float* y, const float* x, int n, float A);
/* backward loops add into the gradient, or with set != 0 assign it (the first write of
 * a gradient in a backward pass: no zeroing of the buffer beforehand) */
typedef void (*ab_unary_bwd)(float* dx, const float* x, const float* y, const float* dy,
                             int n, float A, int set);
/* binary loops take element strides: 1, or 0 for an argument with one element */
typedef void (*ab_binary_fwd)(float* z, const float* x, int sx, const float* y, int sy, int n);
typedef void (*ab_binary_bwd)(float* d, int sd, const float* x, int sx, const float* y, int sy,
                              const float* z, const float* dz, int n, int set);

#define AB_DEFINE_UNARY(NAME, FWD, DERIV)                                           \
AB_LOOP static void ab_##NAME##_fwd(float* restrict y_, const float* restrict x_, int n, float A) { \
    (void)A;                                                                        \
    for (int i = 0; i < n; i++) { const float X = x_[i]; y_[i] = (FWD); }           \
}                                                                                   \
AB_LOOP static void ab_##NAME##_bwd(float* restrict dx_, const float* restrict x_,  \
                            const float* restrict y_, const float* restrict dy_,    \
                            int n, float A, int set) {                              \
    (void)A;                                                                        \
    if (set)                                                                        \
        for (int i = 0; i < n; i++) {                                               \
            const float X = x_[i], Y = y_[i]; (void)X; (void)Y;                     \
            dx_[i] = (DERIV) * dy_[i];                                              \
        }                                                                           \
    else                                                                            \
        for (int i = 0; i < n; i++) {                                               \
            const float X = x_[i], Y = y_[i]; (void)X; (void)Y;                     \
            dx_[i] += (DERIV) * dy_[i];                                             \
        }                                                                           \
}
#define AB_DEFINE_UNARY_API(NAME, ATTR, DEFAULT, FWD, DERIV) AB_DEFINE_UNARY(NAME, FWD, DERIV)
AB_UNARY_OPS(AB_DEFINE_UNARY_API)
AB_UNARY_INTERNAL_OPS(AB_DEFINE_UNARY)

/* The API's unary ops as data, for the op table and the Python functions. */
typedef struct {
    const char* name;
    const char* attr;       /* the keyword of the constant A, "_" if none */
    float attr_default;
    ab_unary_fwd fwd;
    ab_unary_bwd bwd;
    const char* fwd_text;   /* the line's FWD and DERIV as written: the docstring shows them */
    const char* deriv_text;
} ab_unary_info;

#define AB_UNARY_INFO(NAME, ATTR, DEFAULT, FWD, DERIV) \
    {#NAME, #ATTR, DEFAULT, ab_##NAME##_fwd, ab_##NAME##_bwd, #FWD, #DERIV},
static const ab_unary_info ab_unary_api[] = { AB_UNARY_OPS(AB_UNARY_INFO) };
#define AB_UNARY_API_COUNT ((int)(sizeof(ab_unary_api) / sizeof(ab_unary_api[0])))

#define AB_DEFINE_BINARY(NAME, FWD, DX, DY)                                         \
AB_LOOP static void ab_##NAME##_fwd(float* restrict z_, const float* restrict x_, int sx, \
                            const float* restrict y_, int sy, int n) {              \
    for (int i = 0; i < n; i++) { const float X = x_[i * sx], Y = y_[i * sy]; z_[i] = (FWD); } \
}                                                                                   \
AB_LOOP static void ab_##NAME##_bwd_x(float* restrict d_, int sd, const float* restrict x_, int sx, \
                              const float* restrict y_, int sy, const float* restrict z_, \
                              const float* restrict dz_, int n, int set) {          \
    if (set)                    /* only for sd == 1: every element written once */  \
        for (int i = 0; i < n; i++) {                                               \
            const float X = x_[i * sx], Y = y_[i * sy], Z = z_[i]; (void)X; (void)Y; (void)Z; \
            d_[i] = (DX) * dz_[i];                                                  \
        }                                                                           \
    else                                                                            \
        for (int i = 0; i < n; i++) {                                               \
            const float X = x_[i * sx], Y = y_[i * sy], Z = z_[i]; (void)X; (void)Y; (void)Z; \
            d_[i * sd] += (DX) * dz_[i];                                            \
        }                                                                           \
}                                                                                   \
AB_LOOP static void ab_##NAME##_bwd_y(float* restrict d_, int sd, const float* restrict x_, int sx, \
                              const float* restrict y_, int sy, const float* restrict z_, \
                              const float* restrict dz_, int n, int set) {          \
    if (set)                    /* only for sd == 1: every element written once */  \
        for (int i = 0; i < n; i++) {                                               \
            const float X = x_[i * sx], Y = y_[i * sy], Z = z_[i]; (void)X; (void)Y; (void)Z; \
            d_[i] = (DY) * dz_[i];                                                  \
        }                                                                           \
    else                                                                            \
        for (int i = 0; i < n; i++) {                                               \
            const float X = x_[i * sx], Y = y_[i * sy], Z = z_[i]; (void)X; (void)Y; (void)Z; \
            d_[i * sd] += (DY) * dz_[i];                                            \
        }                                                                           \
}
AB_BINARY_OPS(AB_DEFINE_BINARY)

/* The loops of an op by its name; 0 if there is no such elementwise op. */
static inline int ab_find_unary(const char* name, ab_unary_fwd* fwd, ab_unary_bwd* bwd) {
#define AB_FIND_UNARY(NAME, FWD, DERIV)                                             \
    if (strcmp(name, #NAME) == 0) { *fwd = ab_##NAME##_fwd; *bwd = ab_##NAME##_bwd; return 1; }
#define AB_FIND_UNARY_API(NAME, ATTR, DEFAULT, FWD, DERIV) AB_FIND_UNARY(NAME, FWD, DERIV)
    AB_UNARY_OPS(AB_FIND_UNARY_API)
    AB_UNARY_INTERNAL_OPS(AB_FIND_UNARY)
    return 0;
}

static inline int ab_find_binary(const char* name, ab_binary_fwd* fwd, ab_binary_bwd* bwd_x,
                                 ab_binary_bwd* bwd_y) {
#define AB_FIND_BINARY(NAME, FWD, DX, DY)                                           \
    if (strcmp(name, #NAME) == 0) {                                                 \
        *fwd = ab_##NAME##_fwd; *bwd_x = ab_##NAME##_bwd_x; *bwd_y = ab_##NAME##_bwd_y; return 1; }
    AB_BINARY_OPS(AB_FIND_BINARY)
    return 0;
}
#endif
