/* gpu_test.h — shared by the GPU tests: skip without a device, a CUDA backend per test, CPU/GPU tensor pairs. */
#ifndef TRAIND_TEST_GPU_TEST_H
#define TRAIND_TEST_GPU_TEST_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "be_cuda.h"
#include "device.h"
#include "tensor.h"

/* Skips the calling test (not fails it) on a machine without a usable GPU. */
static inline void gpu_or_skip(void)
{
    char why[256] = "";
    int n = 0;
    cr_assert_eq(gpu_device_count(&n, why, sizeof why), 0);
    if (n == 0)
        cr_skip_test("no GPU on this machine (%s): the GPU suite runs on a CUDA device only", why);
}

/* cuda:0 for this test; freed by gpu_end. */
static inline const struct backend *gpu_begin(void)
{
    gpu_or_skip();
    struct backend *be = NULL;
    struct err e = {0};
    cr_assert_eq(be_cuda_create(0, &be, &e), 0, "be_cuda_create: %s", e.msg);
    return be;
}

static inline void gpu_end(const struct backend *be)
{
    be_cuda_destroy((struct backend *)be);
}

/*
 * A suite whose tests each get cuda:0 as the file's `be` (skipping without a GPU), freed after
 * the test: GPU_SUITE(name, timeout_seconds).
 */
#define GPU_SUITE(name, secs)                                                              \
    static const struct backend *be;                                                       \
    static void gpu_suite_setup(void) { be = gpu_begin(); }                                \
    static void gpu_suite_teardown(void)                                                   \
    {                                                                                      \
        if (be)                                                                            \
            gpu_end(be);                                                                   \
        be = NULL;                                                                         \
    }                                                                                      \
    TestSuite(name, .init = gpu_suite_setup, .fini = gpu_suite_teardown, .timeout = (secs))

/* Deterministic, varied values of both signs (no two alike). */
static inline double *pattern(int64_t n, int seed)
{
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    cr_assert_not_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = 0.25 + sin(1.7 * (double)(i + 1) + 0.9 * seed) * (1.0 + 0.1 * (double)(i % 5));
    return v;
}

/* A new contiguous tensor on be holding vals (converted to dt). */
static inline struct tensor *tensor_on(const struct backend *be, enum tensor_dtype dt, int nd,
                                       const int64_t *shape, const double *vals)
{
    struct err e = {0};
    struct tensor *t = tensor_new(be, dt, nd, shape, &e);
    cr_assert_not_null(t, "tensor_new on %s: %s", be->name, e.msg);
    if (vals)
        cr_assert_eq(tensor_copy_from_host_f64(t, vals, &e), 0, "%s", e.msg);
    return t;
}

/* Every element of a contiguous tensor (on any backend) as doubles. */
static inline double *values_of(const struct tensor *t)
{
    struct err e = {0};
    int64_t n = tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    cr_assert_not_null(v);
    cr_assert_eq(tensor_copy_to_host_f64(t, v, &e), 0, "%s", e.msg);
    return v;
}

/* max_i |got - want| / (scale_i + eps) <= tol, naming the worst element. scale NULL: |want|.
 * A scale is for sums whose terms may cancel: their rounding is relative to the terms. */
static inline void expect_close_scaled(const double *got, const double *want, const double *scale,
                                       int64_t n, double tol, double eps, const char *what)
{
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]) / ((scale ? scale[i] : fabs(want[i])) + eps);
        if (!(err <= worst)) {   /* NaN counts as worst */
            worst = err;
            at = i;
        }
        if (isnan(err))
            break;
    }
    cr_expect(worst <= tol, "%s: element %lld: gpu %.17g, cpu %.17g (normalised error %.3g > %.3g)",
              what, (long long)at, n ? got[at] : 0.0, n ? want[at] : 0.0, worst, tol);
}

/* max_i |got - want| / (|want| + eps) <= tol, naming the worst element. */
static inline void expect_close(const double *got, const double *want, int64_t n, double tol,
                                double eps, const char *what)
{
    expect_close_scaled(got, want, NULL, n, tol, eps, what);
}

#endif
