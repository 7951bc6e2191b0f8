/* conformance.h — the conformance tests' harness: the same tensors on CPU and GPU, guarded GPU outputs. */
#ifndef TRAIND_TEST_GPU_CONFORMANCE_H
#define TRAIND_TEST_GPU_CONFORMANCE_H

#include "gpu_test.h"

#define GUARD 256          /* sentinel bytes on each side of every GPU output */
#define SENTINEL 0xA5

/* Tolerances of the normalised error |gpu - cpu| / (|cpu| + eps), per dtype. Elementwise
 * kernels repeat the CPU's arithmetic (bit-identical expected); sums and GEMM reorder it. */
#define TOL_ELEM(dt) ((dt) == TENSOR_F64 ? 1e-15 : 1e-7)
#define TOL_SUM(dt) ((dt) == TENSOR_F64 ? 1e-12 : 3e-7)
#define TOL_GEMM(dt) ((dt) == TENSOR_F64 ? 1e-12 : 1e-5)
/* GEMM results near 0 come from cancelling O(1) terms: their error is absolute, so eps is 1. */
#define EPS_GEMM 1.0
#define EPS(dt) ((dt) == TENSOR_F64 ? 1e-300 : 1e-30)

static const enum tensor_dtype both_dtypes[] = {TENSOR_F64, TENSOR_F32};

/* One tensor's values on the CPU (c) and the GPU (g). */
struct dual {
    struct tensor *c, *g;
};

static inline struct dual dual_new(const struct backend *be, enum tensor_dtype dt, int nd,
                                   const int64_t *shape, int seed)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    /* An empty tensor gets no values: core calls a fresh (3, 0) tensor non-contiguous and
     * refuses host copies into device memory for it. */
    double *v = n ? pattern(n, seed) : NULL;
    struct dual d = {tensor_on(be_cpu(), dt, nd, shape, v), tensor_on(be, dt, nd, shape, v)};
    free(v);
    return d;
}

static inline struct dual dual_slice(struct dual d, int dim, int64_t start, int64_t stop)
{
    struct err e = {0};
    struct dual s = {tensor_slice(d.c, dim, start, stop, &e), tensor_slice(d.g, dim, start, stop, &e)};
    cr_assert(s.c && s.g, "%s", e.msg);
    return s;
}

static inline struct dual dual_select(struct dual d, int dim, int64_t index)
{
    struct err e = {0};
    struct dual s = {tensor_select(d.c, dim, index, &e), tensor_select(d.g, dim, index, &e)};
    cr_assert(s.c && s.g, "%s", e.msg);
    return s;
}

static inline void dual_free(struct dual d)
{
    tensor_free(d.c);
    tensor_free(d.g);
}

/* t seen with shape (nd, shape): stretched size-1 and new leading dims get stride 0. */
static inline struct tensor bcast(const struct tensor *t, int nd, const int64_t *shape)
{
    struct tensor v = *t;
    int off = nd - t->ndim;
    for (int d = 0; d < nd; d++) {
        int s = d - off;
        v.shape[d] = shape[d];
        v.stride[d] = (s < 0 || (t->shape[s] == 1 && shape[d] != 1)) ? 0 : t->stride[s];
    }
    v.ndim = nd;
    return v;
}

/* An output: a CPU tensor and a GPU tensor inside a buffer with sentinel guards. */
struct guarded {
    struct tensor *c, *g;
    char *raw;
    size_t payload;
    const struct backend *be;
};

static inline void store_as(char *p, enum tensor_dtype dt, double v)
{
    if (dt == TENSOR_F64) {
        memcpy(p, &v, sizeof v);
    } else {
        float f = (float)v;
        memcpy(p, &f, sizeof f);
    }
}

/* init NULL: the payload is NaN on both sides (outputs with beta 0 must not read it). */
static inline struct guarded out_new(const struct backend *be, enum tensor_dtype dt, int nd,
                                     const int64_t *shape, const double *init)
{
    struct err e = {0};
    struct guarded o = {.be = be};
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    size_t es = tensor_dtype_size(dt);
    o.payload = (size_t)n * es;
    double *vals = malloc(sizeof(double) * (size_t)(n ? n : 1));
    char *stage = malloc(o.payload + 2 * GUARD);
    cr_assert(vals && stage);
    for (int64_t i = 0; i < n; i++)
        vals[i] = init ? init[i] : NAN;
    memset(stage, SENTINEL, o.payload + 2 * GUARD);
    for (int64_t i = 0; i < n; i++)
        store_as(stage + GUARD + (size_t)i * es, dt, vals[i]);
    o.c = tensor_on(be_cpu(), dt, nd, shape, vals);
    o.raw = be->alloc(be, o.payload + 2 * GUARD, &e);
    cr_assert_not_null(o.raw, "%s", e.msg);
    cr_assert_eq(be->from_host(be, o.raw, stage, o.payload + 2 * GUARD, &e), 0, "%s", e.msg);
    o.g = tensor_wrap(be, o.raw + GUARD, dt, nd, shape, NULL, &e);
    cr_assert_not_null(o.g, "%s", e.msg);
    free(vals);
    free(stage);
    return o;
}

/* The guards are intact and the GPU output agrees with the CPU's, the error normalised by
 * scale (NULL: the CPU's values; expect_close_scaled). */
static inline void out_check_scaled(struct guarded *o, double tol, const double *scale, double eps,
                                    const char *what)
{
    struct err e = {0};
    unsigned char *all = malloc(o->payload + 2 * GUARD);
    cr_assert_not_null(all);
    cr_assert_eq(o->be->to_host(o->be, all, o->raw, o->payload + 2 * GUARD, &e), 0,
                 "%s: %s", what, e.msg);
    for (size_t i = 0; i < GUARD; i++) {
        cr_assert_eq(all[i], SENTINEL, "%s: wrote %zu bytes before the output", what, GUARD - i);
        cr_assert_eq(all[GUARD + o->payload + i], SENTINEL,
                     "%s: wrote past the end of the output (byte %zu after it)", what, i);
    }
    free(all);
    double *got = values_of(o->g), *want = values_of(o->c);
    expect_close_scaled(got, want, scale, tensor_numel(o->c), tol, eps, what);
    free(got);
    free(want);
}

static inline void out_check(struct guarded *o, double tol, double eps, const char *what)
{
    out_check_scaled(o, tol, NULL, eps, what);
}

static inline void out_free(struct guarded *o)
{
    tensor_free(o->c);
    tensor_free(o->g);
    o->be->free(o->be, o->raw);
}

#endif
