/* job_helpers.h — shared by the tests of jobs (daemon's and api's): specs and metrics rows. */
#ifndef TRAIND_TEST_JOB_HELPERS_H
#define TRAIND_TEST_JOB_HELPERS_H

#include <criterion/criterion.h>
#include <math.h>

#include "job.h"
#include "spec.h"

/* A parsed spec from its JSON text; the test fails where it does not parse. */
static inline struct job_spec *spec_of(const char *text)
{
    json_t *root = json_loads(text, 0, NULL);
    cr_assert_not_null(root);
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(spec_parse(root, &s, &se), 0, "%s: %s", se.field, se.message);
    json_decref(root);
    return s;
}

/* A new queued job of the spec text in r. */
static inline struct job *new_job(struct job_registry *r, const char *text)
{
    struct err e = {0};
    struct job *j = job_registry_add(r, spec_of(text), &e);
    cr_assert_not_null(j, "%s", e.msg);
    return j;
}

/* A row of iteration it, no evaluation after it. */
static inline struct metrics_row row(int it, double loss)
{
    struct metrics_row r = {.v = {[METRIC_ITERATION] = it, [METRIC_TIME] = 1.7e9 + it,
                                  [METRIC_LOSS] = loss, [METRIC_LR] = 0.03, [METRIC_EVAL_LOSS] = NAN}};
    return r;
}

/* A row of an iteration after which the test set was evaluated. */
static inline struct metrics_row eval_row(int it, double loss, double eval_loss)
{
    struct metrics_row r = row(it, loss);
    r.v[METRIC_EVAL_LOSS] = eval_loss;
    return r;
}

#endif
