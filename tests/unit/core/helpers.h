/* helpers.h — shared by the core tests: fixture records, tensors from values, comparisons. */
#ifndef TRAIND_TEST_CORE_HELPERS_H
#define TRAIND_TEST_CORE_HELPERS_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "backend.h"
#include "tensor.h"

/* Reads record `name` ("name count" then count numbers) of fixture file `file` into a new array. */
static inline double *fixture_read(const char *file, const char *name, int64_t *count)
{
    char path[512], tok[128];
    snprintf(path, sizeof path, "%s/%s", FIXTURES_DIR, file);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    while (fscanf(f, "%127s", tok) == 1) {
        if (tok[0] == '#') {
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n') {}
            continue;
        }
        long long n;
        cr_assert_eq(fscanf(f, "%lld", &n), 1, "%s: record %s has no count", path, tok);
        double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
        cr_assert_not_null(v);
        for (long long i = 0; i < n; i++)
            cr_assert_eq(fscanf(f, "%lf", &v[i]), 1, "%s: short record %s", path, tok);
        if (strcmp(tok, name) == 0) {
            fclose(f);
            if (count)
                *count = n;
            return v;
        }
        free(v);
    }
    fclose(f);
    cr_assert_fail("%s: no record %s", path, name);
    return NULL;
}

static inline double fixture_scalar(const char *file, const char *name)
{
    double *v = fixture_read(file, name, NULL), x = v[0];
    free(v);
    return x;
}

/* A new float64 CPU tensor holding vals (row-major). */
static inline struct tensor *tensor_from(int ndim, const int64_t *shape, const double *vals)
{
    struct err e = {0};
    struct tensor *t = tensor_new(be_cpu(), TENSOR_F64, ndim, shape, &e);
    cr_assert_not_null(t, "%s", e.msg);
    if (vals)
        cr_assert_eq(tensor_copy_from_host_f64(t, vals, &e), 0, "%s", e.msg);
    return t;
}

/* A float64 tensor with deterministic, varied values (both signs, no two alike). */
static inline struct tensor *tensor_pattern(int ndim, const int64_t *shape, int seed)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = 0.25 + sin(1.7 * (double)(i + 1) + 0.9 * seed) * (1.0 + 0.1 * (double)(i % 5));
    struct tensor *t = tensor_from(ndim, shape, v);
    free(v);
    return t;
}

static inline double *host_values(const struct tensor *t)
{
    struct err e = {0};
    int64_t n = tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    cr_assert_eq(tensor_copy_to_host_f64(t, v, &e), 0, "%s", e.msg);
    return v;
}

static inline double item(const struct tensor *t)
{
    struct err e = {0};
    double v;
    cr_assert_eq(tensor_item(t, &v, &e), 0, "%s", e.msg);
    return v;
}

/* |got - want| <= rel * |want| element by element. */
static inline void assert_close(const double *got, const double *want, int64_t n, double rel,
                                const char *what)
{
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= rel * fabs(want[i]),
                  "%s[%lld]: got %.17g, want %.17g (rel err %.3g)", what, (long long)i, got[i],
                  want[i], fabs(got[i] - want[i]) / fabs(want[i]));
}

#endif
