/* The trainers' update rules, one short loop each, over raw float32 memory.
 *
 * A rule's loop does all the step does to an element: scale the gradient by the
 * clipping factor, update the optimizer state, step the value, apply the weight-decay
 * factor and zero the gradient. The arithmetic is float32 in the order of the numpy
 * expressions in model/trainers.py, one IEEE operation at a time (the module is built
 * with -ffp-contract=off: no FMA; sqrt and division are correctly rounded at every
 * vector width), so every SIMD level gives the same bits as the numpy rule.
 *
 * Each loop is compiled three times, for AVX-512, AVX2 and the baseline (SSE2 on
 * x86-64), and model/update_rules.pyx calls the level the processor runs best, or the one
 * AUTOBATCH_UPDATE_SIMD / set_simd_level forces (the tests run every level). Explicit
 * targets rather than target_clones (kernels/elementwise.h): a clone cannot be forced.
 *
 * The arrays are distinct memory (a parameter's values, its gradient, each state
 * array), so they are `restrict`, except that the new values may be written over the
 * old ones: then the loop reads and writes `theta` only and `old` is never touched. */
#ifndef AUTOBATCH_UPDATE_RULES_H
#define AUTOBATCH_UPDATE_RULES_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    float lr;          /* learning rate (Adam, AMSGrad: the bias-corrected step) */
    float mom;         /* momentum */
    float rho;         /* decay of the running averages (Adadelta, RMSProp) */
    float beta_1;      /* Adam's moment decays */
    float beta_2;
    float eps;
    float scale;       /* clipping factor of the gradient */
    float keep;        /* weight-decay factor of the values after the step */
} ab_hyper;

/* theta (new values) from old (the values before: theta itself, or the other buffer
 * when a live graph reads the values), grad (read, then zeroed), s0..s2 (the rule's
 * state arrays; those it has not are not read), n elements. The `zero` loop of a rule
 * is its loop on a gradient known to be +0 (rows of a lookup table no backward
 * marked): it neither reads nor writes grad, and g is 0.0f * scale, the very product
 * the rule would compute from the stored zero, so the numbers are the same. */
typedef void (*ab_rule_fn)(float* theta, const float* old, float* grad, float* s0,
                           float* s1, float* s2, ptrdiff_t n, const ab_hyper* h);

/* The rules: name and number of state arrays; a rule's id is its place here. */
#define AB_RULES(R) \
    R(sgd, 0) R(momentum, 1) R(adagrad, 1) R(adadelta, 2) R(rmsprop, 1) R(adam, 2) R(amsgrad, 3)

/* One element i of each rule. OLD is `old` or `theta`; GRAD defines g, the clipped
 * gradient (AB_GRAD: read and zeroed; AB_GRAD_ZERO: a known +0 one); h is a local copy
 * of the hyperparameters (stores through the float pointers cannot change it).
 * (1.0f - x) is numpy's 1 - np.float32(x). */
#define AB_GRAD                                                                   \
    const float g = grad[i] * h.scale;                                            \
    grad[i] = 0.0f;
#define AB_GRAD_ZERO                                                              \
    const float g = g_zero;

#define AB_STEP_sgd(OLD, GRAD)                                                    \
    GRAD                                                                          \
    theta[i] = (OLD[i] - h.lr * g) * h.keep;

/* s0: the velocity v */
#define AB_STEP_momentum(OLD, GRAD)                                               \
    GRAD                                                                          \
    s0[i] = s0[i] * h.mom - h.lr * g;                                             \
    theta[i] = (OLD[i] + s0[i]) * h.keep;

/* s0: the sum of squared gradients G */
#define AB_STEP_adagrad(OLD, GRAD)                                                \
    GRAD                                                                          \
    s0[i] = s0[i] + g * g;                                                        \
    theta[i] = (OLD[i] - h.lr * g / sqrtf(s0[i] + h.eps)) * h.keep;

/* s0, s1: the running averages Eg (squared gradients) and Ed (squared steps) */
#define AB_STEP_adadelta(OLD, GRAD)                                               \
    GRAD                                                                          \
    s0[i] = h.rho * s0[i] + (1.0f - h.rho) * g * g;                               \
    const float d = -g * sqrtf(s1[i] + h.eps) / sqrtf(s0[i] + h.eps);             \
    s1[i] = h.rho * s1[i] + (1.0f - h.rho) * d * d;                               \
    theta[i] = (OLD[i] + d) * h.keep;

/* s0: the running average Eg of the squared gradients */
#define AB_STEP_rmsprop(OLD, GRAD)                                                \
    GRAD                                                                          \
    s0[i] = h.rho * s0[i] + (1.0f - h.rho) * g * g;                               \
    theta[i] = (OLD[i] - h.lr * g / sqrtf(s0[i] + h.eps)) * h.keep;

/* Adam and AMSGrad: s0, s1 the moments m and v; the step divides by sqrt(V) */
#define AB_ADAM_MOMENTS(GRAD)                                                     \
    GRAD                                                                          \
    s0[i] = h.beta_1 * s0[i] + (1.0f - h.beta_1) * g;                             \
    s1[i] = h.beta_2 * s1[i] + (1.0f - h.beta_2) * g * g;
#define AB_ADAM_STEP(OLD, V)                                                      \
    theta[i] = (OLD[i] - h.lr * s0[i] / (sqrtf(V) + h.eps)) * h.keep;

#define AB_STEP_adam(OLD, GRAD)                                                   \
    AB_ADAM_MOMENTS(GRAD)                                                         \
    AB_ADAM_STEP(OLD, s1[i])

/* s2: vhat = max(vhat, v), np.maximum's: a NaN on either side wins */
#define AB_STEP_amsgrad(OLD, GRAD)                                                \
    AB_ADAM_MOMENTS(GRAD)                                                         \
    s2[i] = (s2[i] >= s1[i] || s2[i] != s2[i]) ? s2[i] : s1[i];                   \
    AB_ADAM_STEP(OLD, s2[i])

/* A rule at one level, and its loop on a known +0 gradient (`zero`): one loop each,
 * with GRAD choosing how g is had and PRE what it needs first; the in-place loop when
 * theta is old, else the other. */
#define AB_DEFINE_LOOP(NAME, SUFFIX, LEVEL, TARGET, GRAD, PRE)                    \
TARGET static void ab_##NAME##SUFFIX##_##LEVEL(float* restrict theta, const float* restrict old, \
        float* restrict grad, float* restrict s0, float* restrict s1, float* restrict s2, \
        ptrdiff_t n, const ab_hyper* hp) {                                        \
    const ab_hyper h = *hp;                                                       \
    PRE                                                                           \
    (void)grad; (void)s0; (void)s1; (void)s2;                                     \
    if (theta == old) {                                                           \
        for (ptrdiff_t i = 0; i < n; i++) { AB_STEP_##NAME(theta, GRAD) }         \
    } else {                                                                      \
        for (ptrdiff_t i = 0; i < n; i++) { AB_STEP_##NAME(old, GRAD) }           \
    }                                                                             \
}
#define AB_DEFINE_RULE(NAME, LEVEL, TARGET)                                       \
    AB_DEFINE_LOOP(NAME, , LEVEL, TARGET, AB_GRAD, )                              \
    AB_DEFINE_LOOP(NAME, _zero, LEVEL, TARGET, AB_GRAD_ZERO,                      \
                   const float g_zero = 0.0f * h.scale;)

/* The other loops of a step at one level: the weight decay of a parameter no rule
 * stepped, and the clipping norm's sum of squares in double (eight accumulators,
 * x[i] into acc[i % 8], then the tail, then acc[0..7]: the order is part of the
 * result, and every vector width keeps it). The sum over the rows a mask marks, of a
 * table whose other rows are +0, gives the marked elements to the same accumulators
 * in the same order; a +0 term would not have changed one (sums of squares are never
 * -0), so it is the whole sum, bit for bit. */
#define AB_DEFINE_HELPERS(LEVEL, TARGET)                                          \
TARGET static void ab_scale_##LEVEL(float* restrict out, const float* restrict old, \
                                    ptrdiff_t n, float keep) {                    \
    if (out == old) { for (ptrdiff_t i = 0; i < n; i++) out[i] = out[i] * keep; } \
    else { for (ptrdiff_t i = 0; i < n; i++) out[i] = old[i] * keep; }            \
}                                                                                 \
TARGET static double ab_sum_squares_##LEVEL(const float* restrict x, ptrdiff_t n) { \
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, total = 0;                          \
    const ptrdiff_t n8 = n - n % 8;                                               \
    for (ptrdiff_t i = 0; i < n8; i += 8)                                         \
        for (int k = 0; k < 8; k++) acc[k] += (double)x[i + k] * (double)x[i + k]; \
    for (ptrdiff_t i = n8; i < n; i++) total += (double)x[i] * (double)x[i];      \
    for (int k = 0; k < 8; k++) total += acc[k];                                  \
    return total;                                                                 \
}                                                                                 \
TARGET static double ab_sum_squares_rows_##LEVEL(const float* restrict x,         \
        const uint8_t* restrict used, ptrdiff_t n_rows, ptrdiff_t row_size) {     \
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, total = 0;                          \
    const ptrdiff_t n = n_rows * row_size, n8 = n - n % 8;                        \
    for (ptrdiff_t r = 0; r < n_rows; r++) {                                      \
        if (!used[r]) continue;                                                   \
        ptrdiff_t i = r * row_size;                                               \
        const ptrdiff_t stop = i + row_size < n8 ? i + row_size : n8;             \
        for (; i < stop && i % 8; i++) acc[i % 8] += (double)x[i] * (double)x[i]; \
        for (; i + 8 <= stop; i += 8)                                             \
            for (int k = 0; k < 8; k++) acc[k] += (double)x[i + k] * (double)x[i + k]; \
        for (; i < stop; i++) acc[i % 8] += (double)x[i] * (double)x[i];          \
    }                                                                             \
    for (ptrdiff_t i = n8; i < n; i++) total += (double)x[i] * (double)x[i];      \
    for (int k = 0; k < 8; k++) total += acc[k];                                  \
    return total;                                                                 \
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(AB_NO_CLONES)
#define AB_UPDATE_LEVELS 3
#define AB_TARGET_avx512 __attribute__((target("avx512f")))
#define AB_TARGET_avx2 __attribute__((target("avx2")))
#else       /* one portable build: every "level" is it, and only the baseline is offered */
#define AB_UPDATE_LEVELS 1
#define AB_TARGET_avx512
#define AB_TARGET_avx2
#endif
#define AB_TARGET_base

#define AB_DEFINE_LEVEL(LEVEL)                                                    \
    AB_DEFINE_HELPERS(LEVEL, AB_TARGET_##LEVEL)
#define AB_DEFINE_avx512(NAME, STATES) AB_DEFINE_RULE(NAME, avx512, AB_TARGET_avx512)
#define AB_DEFINE_avx2(NAME, STATES) AB_DEFINE_RULE(NAME, avx2, AB_TARGET_avx2)
#define AB_DEFINE_base(NAME, STATES) AB_DEFINE_RULE(NAME, base, AB_TARGET_base)
AB_RULES(AB_DEFINE_avx512)
AB_RULES(AB_DEFINE_avx2)
AB_RULES(AB_DEFINE_base)
AB_DEFINE_LEVEL(avx512)
AB_DEFINE_LEVEL(avx2)
AB_DEFINE_LEVEL(base)

#define AB_COUNT(NAME, STATES) + 1
enum { AB_N_RULES = 0 AB_RULES(AB_COUNT) };
#define AB_NAME(NAME, STATES) #NAME,
#define AB_STATES(NAME, STATES) STATES,
static const char* const ab_rule_names[AB_N_RULES] = {AB_RULES(AB_NAME)};
static const int ab_rule_states[AB_N_RULES] = {AB_RULES(AB_STATES)};

/* The levels, best first; a level's index is its row in the tables below. */
enum { AB_N_LEVELS = 3 };
static const char* const ab_level_names[AB_N_LEVELS] = {"avx512f", "avx2", "default"};
#define AB_ENTRY_avx512(NAME, STATES) ab_##NAME##_avx512,
#define AB_ENTRY_avx2(NAME, STATES) ab_##NAME##_avx2,
#define AB_ENTRY_base(NAME, STATES) ab_##NAME##_base,
static const ab_rule_fn ab_rule_table[AB_N_LEVELS][AB_N_RULES] = {
    {AB_RULES(AB_ENTRY_avx512)}, {AB_RULES(AB_ENTRY_avx2)}, {AB_RULES(AB_ENTRY_base)}};
#define AB_ZERO_avx512(NAME, STATES) ab_##NAME##_zero_avx512,
#define AB_ZERO_avx2(NAME, STATES) ab_##NAME##_zero_avx2,
#define AB_ZERO_base(NAME, STATES) ab_##NAME##_zero_base,
static const ab_rule_fn ab_zero_rule_table[AB_N_LEVELS][AB_N_RULES] = {
    {AB_RULES(AB_ZERO_avx512)}, {AB_RULES(AB_ZERO_avx2)}, {AB_RULES(AB_ZERO_base)}};
typedef void (*ab_scale_fn)(float* out, const float* old, ptrdiff_t n, float keep);
typedef double (*ab_sum_squares_fn)(const float* x, ptrdiff_t n);
static const ab_scale_fn ab_scale_table[AB_N_LEVELS] = {ab_scale_avx512, ab_scale_avx2, ab_scale_base};
static const ab_sum_squares_fn ab_sum_squares_table[AB_N_LEVELS] = {
    ab_sum_squares_avx512, ab_sum_squares_avx2, ab_sum_squares_base};
typedef double (*ab_sum_squares_rows_fn)(const float* x, const uint8_t* used, ptrdiff_t n_rows,
                                         ptrdiff_t row_size);
static const ab_sum_squares_rows_fn ab_sum_squares_rows_table[AB_N_LEVELS] = {
    ab_sum_squares_rows_avx512, ab_sum_squares_rows_avx2, ab_sum_squares_rows_base};

/* Whether this processor runs level `level` (the test GCC's target_clones resolver
 * makes, in the same order). */
static inline int ab_level_runs(int level) {
#if AB_UPDATE_LEVELS == 3
    __builtin_cpu_init();
    if (level == 0) return __builtin_cpu_supports("avx512f");
    if (level == 1) return __builtin_cpu_supports("avx2");
#endif
    return level == AB_N_LEVELS - 1;
}

#endif
