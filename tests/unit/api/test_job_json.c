/* test_job_json.c — the job object the API shows for each state of a job. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "job_helpers.h"
#include "job_json.h"

static struct job_registry *registry(void)
{
    struct err e = {0};
    struct job_registry *r = job_registry_new(&e);
    cr_assert_not_null(r, "%s", e.msg);
    return r;
}

#define SPEC "{\"name\":\"n\",\"data\":{\"train\":\"x\"},\"iterations\":4}"

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

Test(job_json, a_new_job_shows_queued_its_name_and_spec_and_nulls_for_what_has_not_happened)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    json_t *o = api_job_json(j, 1);
    cr_expect_str_eq(str(o, "id"), job_id(j));
    cr_expect_str_eq(str(o, "state"), "queued");
    cr_expect_str_eq(str(o, "name"), "n");
    cr_expect(json_is_null(json_object_get(o, "started_at")));
    cr_expect(json_is_null(json_object_get(o, "error")));
    cr_expect(json_is_null(json_object_get(o, "metrics")));
    cr_expect(json_is_object(json_object_get(o, "spec")));
    json_decref(o);
    job_registry_free(r);
}

Test(job_json, created_at_is_rfc3339_utc)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_set_times(j, 1763777880.25, 0, 0);   /* 2025-11-22T02:18:00.250Z */
    json_t *o = api_job_json(j, 0);
    cr_expect_str_eq(str(o, "created_at"), "2025-11-22T02:18:00.250Z");
    json_decref(o);
    job_registry_free(r);
}

Test(job_json, running_job_shows_device_progress_and_last_metrics)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    struct metrics_row r0 = row(0, 9.0), r1 = row(1, 4.0);
    cr_assert_eq(job_append_metrics(j, &r0, NULL), 0);
    cr_assert_eq(job_append_metrics(j, &r1, NULL), 0);
    json_t *o = api_job_json(j, 0);
    cr_expect_str_eq(str(o, "state"), "running");
    cr_expect_str_eq(str(o, "device"), "cpu");
    json_t *p = json_object_get(o, "progress");
    cr_expect_eq(json_integer_value(json_object_get(p, "iteration")), 2);
    cr_expect_eq(json_real_value(json_object_get(p, "fraction")), 0.5);
    cr_expect_eq(json_real_value(json_object_get(json_object_get(o, "metrics"), "loss")), 4.0);
    cr_expect_null(json_object_get(o, "spec"), "the list form leaves the spec out");
    json_decref(o);
    job_registry_free(r);
}

Test(job_json, failed_job_shows_error_code_and_message)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    job_finish(j, ERR_INVALID_DATA, "d/part-00000.csv:3:2: not a number", NULL);
    json_t *o = api_job_json(j, 1);
    cr_expect_str_eq(str(o, "state"), "failed");
    json_t *err = json_object_get(o, "error");
    cr_expect_str_eq(str(err, "code"), "invalid_data");
    cr_expect_str_eq(str(err, "message"), "d/part-00000.csv:3:2: not a number");
    cr_expect(json_is_string(json_object_get(o, "finished_at")));
    json_decref(o);
    job_registry_free(r);
}

Test(job_json, cancelled_job_has_no_error)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_finish(j, ERR_CANCELLED, "cancelled at iteration 0", NULL);
    json_t *o = api_job_json(j, 0);
    cr_expect_str_eq(str(o, "state"), "cancelled");
    cr_expect(json_is_null(json_object_get(o, "error")));
    json_decref(o);
    job_registry_free(r);
}

Test(job_json, succeeded_job_shows_parameters_by_shape)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    struct job_params *ps = calloc(1, sizeof *ps);
    ps->n = 2;
    ps->p = calloc(2, sizeof *ps->p);
    strcpy(ps->p[0].name, "w");
    ps->p[0].rows = 2;
    ps->p[0].cols = 1;
    ps->p[0].values = malloc(2 * sizeof(double));
    ps->p[0].values[0] = 0.1;
    ps->p[0].values[1] = -2.5;
    strcpy(ps->p[1].name, "b");
    ps->p[1].rows = 1;
    ps->p[1].cols = 1;
    ps->p[1].values = malloc(sizeof(double));
    ps->p[1].values[0] = 3.0;
    job_finish(j, ERR_OK, NULL, ps);
    json_t *o = api_job_json(j, 1);
    cr_expect_str_eq(str(o, "state"), "succeeded");
    json_t *w = json_object_get(json_object_get(o, "parameters"), "w");
    cr_assert_eq(json_array_size(w), 2);
    cr_expect_eq(json_array_size(json_array_get(w, 0)), 1);
    cr_expect_eq(json_real_value(json_array_get(json_array_get(w, 1), 0)), -2.5);
    json_t *b = json_object_get(json_object_get(o, "parameters"), "b");
    cr_expect_eq(json_real_value(json_array_get(json_array_get(b, 0), 0)), 3.0);
    json_decref(o);
    job_registry_free(r);
}

Test(job_json, a_paused_job_shows_paused_and_no_device)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    cr_assert_eq(job_pause(j, 0), 0);
    json_t *o = api_job_json(j, 0);
    cr_expect_str_eq(str(o, "state"), "paused");
    cr_expect(json_is_null(json_object_get(o, "device")));
    json_decref(o);
    job_registry_free(r);
}

Test(job_json, a_spec_that_does_not_fit_the_data_fails_as_invalid_spec)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    job_finish(j, ERR_INVALID_ARG, "d.csv: label column 9, but rows have 3 columns", NULL);
    json_t *o = api_job_json(j, 0);
    cr_expect_str_eq(str(json_object_get(o, "error"), "code"), "invalid_spec");
    json_decref(o);
    job_registry_free(r);
}

Test(job_json, last_metrics_show_the_latest_evaluation_and_the_iteration_it_followed)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    json_t *o = NULL;
    struct metrics_row r0 = row(0, 9.0), r1 = eval_row(1, 4.0, 5.5), r2 = row(2, 3.0);
    cr_assert_eq(job_append_metrics(j, &r0, NULL), 0);
    o = api_job_json(j, 0);
    cr_expect(json_is_null(json_object_get(json_object_get(o, "metrics"), "eval_loss")));
    cr_expect(json_is_null(json_object_get(json_object_get(o, "metrics"), "eval_iteration")));
    json_decref(o);
    cr_assert_eq(job_append_metrics(j, &r1, NULL), 0);
    cr_assert_eq(job_append_metrics(j, &r2, NULL), 0);
    o = api_job_json(j, 0);
    json_t *m = json_object_get(o, "metrics");
    cr_expect_eq(json_real_value(json_object_get(m, "loss")), 3.0, "the rest is the latest row's");
    cr_expect_eq(json_real_value(json_object_get(m, "eval_loss")), 5.5);
    cr_expect_eq(json_integer_value(json_object_get(m, "eval_iteration")), 1);
    json_decref(o);
    job_registry_free(r);
}
