/* test_job.c — the job registry, its state changes, and its metrics pages. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "job.h"
#include "job_helpers.h"
#include "scratch_dir.h"

/* Every registry here keeps its history in a state database of its own, as traind's does. */
static struct db *D;

static void remove_dir(void)
{
    db_close(D);
    D = NULL;
    scratch_dir_remove();
}

TestSuite(job, .init = scratch_dir_make, .fini = remove_dir);

static struct job_registry *registry(void)
{
    struct err e = {0};
    cr_assert_eq(db_open(dir, &D, &e), 0, "%s", e.msg);
    struct job_registry *r = job_registry_new(&e);
    cr_assert_not_null(r);
    db_attach(D, r);
    return r;
}

/* The database first: it reads the registry's jobs until it closes. */
static void release(struct job_registry *r)
{
    db_close(D);
    D = NULL;
    job_registry_free(r);
}

static json_t *metrics_of(const struct job *j, int64_t since, int64_t limit, int64_t max_points)
{
    json_t *o = db_metrics_to_json(D, j, since, limit, max_points);
    cr_assert_not_null(o, "the metrics page of job %s", job_id(j));
    return o;
}

#define SPEC "{\"name\":\"n\",\"data\":{\"train\":\"x\"},\"iterations\":4}"

Test(job, new_job_is_queued_with_a_16_hex_id)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    cr_expect_eq(strlen(job_id(j)), 16);
    cr_expect_eq(strspn(job_id(j), "0123456789abcdef"), 16);
    cr_expect_eq(job_state(j), JOB_QUEUED);
    release(r);
}

Test(job, terminal_state_never_changes)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_finish(j, ERR_CANCELLED, NULL, NULL);
    job_mark_running(j, "cpu");
    job_finish(j, ERR_OK, NULL, NULL);
    cr_expect_eq(job_state(j), JOB_CANCELLED);
    release(r);
}

Test(job, metrics_page_starts_at_since_and_says_where_to_continue)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    for (int i = 0; i < 4; i++) {
        struct metrics_row x = row(i, 10.0 - i);
        cr_assert_eq(job_append_metrics(j, &x, NULL), 0);
    }
    json_t *o = metrics_of(j, 1, 2, 0);
    json_t *cols = json_object_get(o, "columns");
    cr_expect_eq(json_array_size(cols), METRIC_NCOLS);
    cr_expect_str_eq(json_string_value(json_array_get(cols, 2)), "loss");
    json_t *rows = json_object_get(o, "rows");
    cr_assert_eq(json_array_size(rows), 2);
    cr_expect_eq(json_integer_value(json_array_get(json_array_get(rows, 0), 0)), 1);
    cr_expect_eq(json_real_value(json_array_get(json_array_get(rows, 1), 2)), 8.0);
    cr_expect_eq(json_integer_value(json_object_get(o, "next_since")), 3);
    json_decref(o);
    release(r);
}

Test(job, non_finite_loss_renders_as_null)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    struct metrics_row x = row(0, 1.0 / 0.0);
    cr_assert_eq(job_append_metrics(j, &x, NULL), 0);
    json_t *o = metrics_of(j, 0, 10, 0);
    cr_expect(json_is_null(json_array_get(json_array_get(json_object_get(o, "rows"), 0), 2)));
    json_decref(o);
    release(r);
}

Test(job, next_queued_prefers_priority_then_age)
{
    struct job_registry *r = registry();
    struct job *a = new_job(r, SPEC);
    struct job *b = new_job(r, "{\"priority\":5,\"data\":{\"train\":\"x\"},\"iterations\":1}");
    struct job *c = new_job(r, "{\"priority\":5,\"data\":{\"train\":\"x\"},\"iterations\":1}");
    cr_expect_eq(job_registry_next_queued(r), b);
    job_mark_running(b, "cpu");
    cr_expect_eq(job_registry_next_queued(r), c);
    job_mark_running(c, "cpu");
    cr_expect_eq(job_registry_next_queued(r), a);
    release(r);
}

Test(job, find_by_id_and_by_client_id)
{
    struct job_registry *r = registry();
    struct job *a = new_job(r, "{\"client_id\":\"abc\",\"data\":{\"train\":\"x\"},\"iterations\":1}");
    cr_expect_eq(job_registry_find(r, job_id(a)), a);
    cr_expect_eq(job_registry_find_client_id(r, "abc"), a);
    cr_expect_null(job_registry_find(r, "0000000000000000"));
    cr_expect_null(job_registry_find_client_id(r, "abd"));
    release(r);
}

Test(job, a_history_of_many_blocks_is_kept_whole_and_paged_from_anywhere)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, "{\"data\":{\"train\":\"x\"},\"iterations\":2000000}");
    job_mark_running(j, "cpu");
    int n = 5000;   /* about twenty blocks, written in several flushes */
    for (int i = 0; i < n; i++) {
        struct metrics_row x = row(i, 1.0 / (i + 1));
        cr_assert_eq(job_append_metrics(j, &x, NULL), 0);
    }
    json_t *o = metrics_of(j, 1234, 3000, 0);
    json_t *rows = json_object_get(o, "rows");
    cr_assert_eq(json_array_size(rows), 3000);
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *x = json_array_get(rows, i);
        cr_assert_eq(json_integer_value(json_array_get(x, 0)), 1234 + (json_int_t)i);
        cr_assert_eq(json_real_value(json_array_get(x, 2)), 1.0 / (1234.0 + (double)i + 1.0));
    }
    cr_expect_eq(json_integer_value(json_object_get(o, "next_since")), 4234);
    json_decref(o);
    o = metrics_of(j, 0, -1, 0);
    cr_expect_eq(json_array_size(json_object_get(o, "rows")), (size_t)n, "no limit: every row");
    json_decref(o);
    release(r);
}

Test(job, only_an_ended_job_can_be_removed)
{
    struct job_registry *r = registry();
    struct job *a = new_job(r, SPEC);
    struct job *b = new_job(r, SPEC);
    char id[17];
    strcpy(id, job_id(a));
    job_mark_running(a, "cpu");
    cr_expect_eq(job_registry_remove(r, a), -1, "a running job stays");
    job_finish(a, ERR_OK, NULL, NULL);
    cr_expect_eq(job_registry_remove(r, a), 0);
    cr_expect_null(job_registry_find(r, id));
    cr_expect_eq(job_registry_count(r), 1);
    cr_expect_eq(job_registry_at(r, 0), b);
    release(r);
}

Test(job, requeue_drops_the_rows_from_the_resume_point_on)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    for (int i = 0; i < 4; i++) {
        struct metrics_row m = row(i, 1.0 + i);
        cr_assert_eq(job_append_metrics(j, &m, NULL), 0);
    }
    cr_assert_eq(job_requeue(j, 2), 0);
    cr_expect_eq(job_state(j), JOB_QUEUED);
    cr_expect_eq(job_iterations_done(j), 2);
    json_t *o = metrics_of(j, 0, 100, 0);
    cr_expect_eq(json_array_size(json_object_get(o, "rows")), 2);
    cr_expect_eq(json_integer_value(json_object_get(o, "next_since")), 2);
    json_decref(o);
    cr_expect_eq(job_last_metrics(j)->v[METRIC_ITERATION], 1);
    release(r);
}

Test(job, paused_goes_back_through_queued_and_ended_jobs_cannot_pause)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    cr_assert_eq(job_pause(j, 0), 0);
    cr_expect_eq(job_state(j), JOB_PAUSED);
    cr_expect_str_eq(job_device(j), "", "a paused job holds no device");
    cr_expect_eq(job_resume(j), 0);
    cr_expect_eq(job_state(j), JOB_QUEUED);
    cr_expect_eq(job_resume(j), -1, "only a paused job resumes");
    job_finish(j, ERR_CANCELLED, NULL, NULL);
    cr_expect_eq(job_pause(j, 0), -1);
    cr_expect_eq(job_requeue(j, 0), -1);
    release(r);
}

Test(job, downsampling_keeps_each_buckets_first_last_lowest_and_highest)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    /* 16 rows, one bucket of 8 per 4 points: bucket 0 has its low at 3 and high at 5. */
    static const double loss[16] = {5, 6, 4, 1, 7, 9, 2, 3, 8, 8, 0.5, 8, 8, 12, 8, 8};
    for (int i = 0; i < 16; i++) {
        struct metrics_row m = row(i, loss[i]);
        cr_assert_eq(job_append_metrics(j, &m, NULL), 0);
    }
    json_t *o = metrics_of(j, 0, 100, 8);
    json_t *rows = json_object_get(o, "rows");
    static const int want[] = {0, 3, 5, 7, 8, 10, 13, 15};
    cr_assert_eq(json_array_size(rows), 8);
    for (size_t i = 0; i < 8; i++)
        cr_expect_eq(json_integer_value(json_array_get(json_array_get(rows, i), 0)), want[i], "row %zu", i);
    cr_expect_eq(json_integer_value(json_object_get(o, "next_since")), 16);
    json_decref(o);
    release(r);
}

static int events[JOB_EV_REMOVED + 1];

static int count_event(void *ctx, enum job_event ev, const struct job *j, const struct metrics_row *m,
                       struct err *e)
{
    events[ev]++;
    cr_expect_eq(ev == JOB_EV_METRICS, m != NULL, "a row comes with metrics events only");
    return 0;
}

Test(job, every_change_reaches_the_observer)
{
    struct job_registry *r = registry();
    job_registry_set_observer(r, count_event, NULL);
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    struct metrics_row m = row(0, 1.0);
    job_append_metrics(j, &m, NULL);
    job_add_checkpoint(j, 1, 0, "/tmp/x.safetensors", NULL);
    job_finish(j, ERR_OK, NULL, NULL);
    job_registry_remove(r, j);
    cr_expect_eq(events[JOB_EV_ADDED], 1);
    cr_expect_eq(events[JOB_EV_CHANGED], 2);
    cr_expect_eq(events[JOB_EV_METRICS], 1);
    cr_expect_eq(events[JOB_EV_CHECKPOINT], 1);
    cr_expect_eq(events[JOB_EV_REMOVED], 1);
    release(r);
}

/*
 * The metrics body is written by hand for speed; it must be byte for byte what jansson writes
 * for the same rows with the API's settings (compact, 17 significant digits): exponents, whole
 * numbers, denormals, negative zero and non-finite values included.
 */
Test(job, metrics_text_is_what_jansson_writes_for_the_same_rows)
{
    static const double values[] = {0.0, -0.0, 1.0, -2.5, 0.1, 1e5, 1e-5, 1.5e-7, 1e21, 1e22,
                                    123456789012345678.0, 1.7976931348623157e308, 5e-324,
                                    2.2250738585072014e-308, 583.9249383, 1.0 / 0.0, -1.0 / 0.0,
                                    0.0 / 0.0, 1763790000.123456, 3e-300};
    const size_t nv = sizeof values / sizeof values[0];
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    json_t *want = json_object(), *cols = json_array(), *rows = json_array();
    for (int c = 0; c < METRIC_NCOLS; c++)
        json_array_append_new(cols, json_string(job_metric_columns[c]));
    for (size_t i = 0; i < nv; i++) {
        struct metrics_row x = {.v = {[METRIC_ITERATION] = (double)i}};
        json_t *a = json_array();
        json_array_append_new(a, json_integer((json_int_t)i));
        for (int c = 1; c < METRIC_NCOLS; c++)
            x.v[c] = values[(i + (size_t)c) % nv];
        struct metrics_row kept = x;
        job_metrics_round(&kept);   /* what the history keeps is what it shows */
        for (int c = 1; c < METRIC_NCOLS; c++)
            json_array_append_new(a, isfinite(kept.v[c]) ? json_real(kept.v[c]) : json_null());
        json_array_append_new(rows, a);
        cr_assert_eq(job_append_metrics(j, &x, NULL), 0);
    }
    json_object_set_new(want, "columns", cols);
    json_object_set_new(want, "rows", rows);
    json_object_set_new(want, "next_since", json_integer((json_int_t)nv));
    char *expect = json_dumps(want, JSON_COMPACT | JSON_REAL_PRECISION(17));
    size_t len;
    struct err e = {0};
    char *got = db_metrics_text(D, j, 0, 1000, 0, &len, &e);
    cr_assert_not_null(got);
    cr_expect_eq(len, strlen(got));
    cr_expect_eq(got[len - 1], '\n');
    got[len - 1] = '\0';
    cr_expect_str_eq(got, expect);
    free(got);
    free(expect);
    json_decref(want);
    release(r);
}

Test(job, eval_loss_is_the_last_column_and_null_where_no_evaluation_ran)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    struct metrics_row r0 = row(0, 9.0), r1 = eval_row(1, 4.0, 5.5);
    cr_assert_eq(job_append_metrics(j, &r0, NULL), 0);
    cr_assert_eq(job_append_metrics(j, &r1, NULL), 0);
    json_t *o = metrics_of(j, 0, 100, 0);
    json_t *cols = json_object_get(o, "columns");
    cr_expect_str_eq(json_string_value(json_array_get(cols, json_array_size(cols) - 1)), "eval_loss");
    json_t *rows = json_object_get(o, "rows");
    cr_expect(json_is_null(json_array_get(json_array_get(rows, 0), METRIC_EVAL_LOSS)));
    cr_expect_eq(json_real_value(json_array_get(json_array_get(rows, 1), METRIC_EVAL_LOSS)), 5.5);
    json_decref(o);
    release(r);
}

Test(job, requeue_before_the_latest_evaluation_falls_back_to_the_one_before)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, SPEC);
    job_mark_running(j, "cpu");
    struct metrics_row rows[4] = {eval_row(0, 9.0, 8.0), row(1, 4.0), eval_row(2, 3.0, 2.0), row(3, 2.0)};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(job_append_metrics(j, &rows[i], NULL), 0);
    double loss;
    cr_expect_eq(job_last_eval(j, &loss), 2);
    cr_assert_eq(job_requeue(j, 2), 0);
    cr_expect_eq(job_last_eval(j, &loss), 0);
    cr_expect_eq(loss, 8.0);
    cr_assert_eq(job_requeue(j, 0), 0);
    cr_expect_eq(job_last_eval(j, &loss), -1);
    release(r);
}

Test(job, downsampling_ignores_eval_loss_and_its_nulls)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, "{\"data\":{\"train\":\"x\"},\"iterations\":100}");
    job_mark_running(j, "cpu");
    for (int i = 0; i < 40; i++) {
        /* the lowest loss at 17, the highest at 3; evaluations every 10th, with extreme values */
        double loss = i == 17 ? 0.5 : i == 3 ? 50.0 : 10.0;
        struct metrics_row m = (i + 1) % 10 == 0 ? eval_row(i, loss, i == 9 ? 1e-9 : 1e9) : row(i, loss);
        cr_assert_eq(job_append_metrics(j, &m, NULL), 0);
    }
    json_t *o = metrics_of(j, 0, 1000, 4);
    json_t *rows = json_object_get(o, "rows");
    int64_t want[] = {0, 3, 17, 39};
    cr_assert_eq(json_array_size(rows), 4);
    for (size_t i = 0; i < 4; i++)
        cr_expect_eq(json_integer_value(json_array_get(json_array_get(rows, i), 0)), want[i]);
    cr_expect_eq(json_real_value(json_array_get(json_array_get(rows, 3), METRIC_EVAL_LOSS)), 1e9);
    json_decref(o);
    release(r);
}

Test(job, downsampling_a_job_with_data_test_also_keeps_each_buckets_latest_evaluation)
{
    struct job_registry *r = registry();
    struct job *j = new_job(r, "{\"data\":{\"train\":\"x\",\"test\":\"t\"},\"iterations\":100,"
                               "\"eval_every\":10}");
    job_mark_running(j, "cpu");
    for (int i = 0; i < 40; i++) {
        double loss = i == 17 ? 0.5 : i == 3 ? 50.0 : 10.0;
        struct metrics_row m = (i + 1) % 10 == 0 ? eval_row(i, loss, 100.0 + i) : row(i, loss);
        cr_assert_eq(job_append_metrics(j, &m, NULL), 0);
    }
    /* 2 buckets of 20 rows, 5 picks each: 0 (first), 3 (max), 17 (min), 19 (eval) | 20 (first, min, max), 39 */
    json_t *o = metrics_of(j, 0, 1000, 10);
    json_t *rows = json_object_get(o, "rows");
    int64_t want[] = {0, 3, 17, 19, 20, 39};
    cr_assert_eq(json_array_size(rows), 6);
    for (size_t i = 0; i < 6; i++)
        cr_expect_eq(json_integer_value(json_array_get(json_array_get(rows, i), 0)), want[i]);
    cr_expect_eq(json_real_value(json_array_get(json_array_get(rows, 3), METRIC_EVAL_LOSS)), 119.0);
    json_decref(o);
    release(r);
}
