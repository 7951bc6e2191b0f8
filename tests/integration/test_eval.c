/* test_eval.c — data.test and eval_every through the real traind: eval_loss rows against PyTorch, errors, restarts. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "jobs.h"
#include "torch_ref.h"

static struct daemon_proc D;

static void setup(void)
{
    cr_assert(daemon_start(&D), "traind did not start (see its log under /tmp/traind-it-*)");
}

static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(eval, .init = setup, .fini = teardown, .timeout = 240);

/* The job of make_eval_fixture.py: 23 iterations of the baseline in batches of 4096. */
enum { ITERS = 23, N_EVALS = 5 };

/* Writes the fixture's training and test sets under D.dir and gives its job's spec (a static buffer). */
static const char *fixture_job(const char *extra)
{
    cr_assert(gen_dctaxi(&D, "dev", 20000, 2));
    cr_assert(gen_dctaxi_seed(&D, "test", 10000, 3, 1));
    static char spec[1024];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\",\"test\":\"%s/test/part*.csv\"},"
             "\"model\":{\"type\":\"linear\"},\"loss\":\"mse\","
             "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.03},\"clip_grad_norm\":0.5,"
             "\"batch_size\":4096,\"iterations\":%d,\"dtype\":\"float64\",\"seed\":0}", D.dir, D.dir, ITERS);
    return extra ? spec_with(spec, extra) : spec;
}

static json_t *metrics_of(const char *id, const char *query)
{
    char path[200];
    snprintf(path, sizeof path, "/jobs/%s/metrics%s", id, query);
    return get_json(&D, path, 200);
}

static void expect_succeeded(const char *id)
{
    json_t *job = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "error: %s",
                     json_string_value(json_object_get(json_object_get(job, "error"), "message")));
    json_decref(job);
}

static void expect_close(double got, double want, const char *what, long long it)
{
    cr_expect(fabs(got - want) <= 1e-9 * fabs(want), "%s after iteration %lld: %.17g, PyTorch %.17g", what,
              it, got, want);
}

Test(eval, eval_loss_equals_pytorchs_over_the_whole_test_set_every_5th_and_at_the_last_iteration)
{
    char id[64];
    submit_job(&D, fixture_job("\"eval_every\":5"), id, sizeof id);
    expect_succeeded(id);

    double at[N_EVALS], want[N_EVALS], loss[ITERS];
    torch_ref_read("TRAIND_EVAL_TORCH", "eval_iterations", at, N_EVALS);
    torch_ref_read("TRAIND_EVAL_TORCH", "eval_loss", want, N_EVALS);
    torch_ref_read("TRAIND_EVAL_TORCH", "loss", loss, ITERS);
    json_t *m = metrics_of(id, "");
    size_t ec = metrics_column(m, "eval_loss"), lc = metrics_column(m, "loss");
    json_t *rows = json_object_get(m, "rows");
    cr_assert_eq(json_array_size(rows), ITERS, "one row per iteration, evaluated or not");
    int k = 0;
    for (size_t i = 0; i < ITERS; i++) {
        json_t *row = json_array_get(rows, i);
        cr_assert_eq(json_integer_value(json_array_get(row, 0)), (json_int_t)i);
        expect_close(json_number_value(json_array_get(row, lc)), loss[i], "training loss", (long long)i);
        json_t *ev = json_array_get(row, ec);
        if (k < N_EVALS && (double)i == at[k]) {
            cr_assert(json_is_number(ev), "no eval_loss after iteration %zu", i);
            expect_close(json_number_value(ev), want[k], "eval_loss", (long long)i);
            k++;
        } else {
            cr_expect(json_is_null(ev), "eval_loss after iteration %zu, where none is due", i);
        }
    }
    cr_expect_eq(k, N_EVALS);
    json_decref(m);
}

Test(eval, without_eval_every_the_test_set_is_evaluated_once_after_the_last_iteration)
{
    char id[64];
    submit_job(&D, fixture_job(NULL), id, sizeof id);
    expect_succeeded(id);
    double want[N_EVALS];
    torch_ref_read("TRAIND_EVAL_TORCH", "eval_loss", want, N_EVALS);
    json_t *m = metrics_of(id, "");
    size_t ec = metrics_column(m, "eval_loss");
    json_t *rows = json_object_get(m, "rows");
    cr_assert_eq(json_array_size(rows), ITERS);
    for (size_t i = 0; i + 1 < ITERS; i++)
        cr_expect(json_is_null(json_array_get(json_array_get(rows, i), ec)), "eval_loss after iteration %zu", i);
    json_t *last = json_array_get(json_array_get(rows, ITERS - 1), ec);
    cr_assert(json_is_number(last));
    expect_close(json_number_value(last), want[N_EVALS - 1], "eval_loss", ITERS - 1);
    json_decref(m);
}

Test(eval, the_job_shows_its_latest_eval_loss_and_the_iteration_it_followed)
{
    char id[64], path[128];
    submit_job(&D, fixture_job("\"eval_every\":5"), id, sizeof id);
    expect_succeeded(id);
    double want[N_EVALS];
    torch_ref_read("TRAIND_EVAL_TORCH", "eval_loss", want, N_EVALS);
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *job = get_json(&D, path, 200);
    json_t *last = json_object_get(job, "metrics");
    cr_expect_eq(json_integer_value(json_object_get(last, "eval_iteration")), ITERS - 1);
    expect_close(json_number_value(json_object_get(last, "eval_loss")), want[N_EVALS - 1], "eval_loss", ITERS - 1);
    json_t *spec = json_object_get(job, "spec");
    cr_expect_eq(json_integer_value(json_object_get(spec, "eval_every")), 5);
    cr_expect_not_null(strstr(json_string_value(json_object_get(json_object_get(spec, "data"), "test")),
                              "/test/part*.csv"));
    json_decref(job);
}

Test(eval, a_downsampled_history_keeps_the_last_rows_eval_loss_and_nulls_elsewhere)
{
    char id[64];
    submit_job(&D, fixture_job("\"eval_every\":5"), id, sizeof id);
    expect_succeeded(id);
    double want[N_EVALS];
    torch_ref_read("TRAIND_EVAL_TORCH", "eval_loss", want, N_EVALS);
    json_t *m = metrics_of(id, "?max_points=8");
    size_t ec = metrics_column(m, "eval_loss");
    json_t *rows = json_object_get(m, "rows");
    cr_assert_leq(json_array_size(rows), 8);
    cr_assert_geq(json_array_size(rows), 2);
    json_t *last = json_array_get(rows, json_array_size(rows) - 1);
    cr_assert_eq(json_integer_value(json_array_get(last, 0)), ITERS - 1, "the last row is kept");
    expect_close(json_number_value(json_array_get(last, ec)), want[N_EVALS - 1], "eval_loss", ITERS - 1);
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        json_int_t it = json_integer_value(json_array_get(row, 0));
        cr_expect(((it + 1) % 5 == 0 || it == ITERS - 1) == json_is_number(json_array_get(row, ec)),
                  "iteration %lld", (long long)it);
    }
    json_decref(m);
}

/* An MLP with loss (its output width outputs) on the fixture's CSVs of net, against PyTorch's records. */
static void expect_network_evals(const char *net, const char *loss, int outputs)
{
    char train[64], test[64], spec[1400], id[64], rec[64];
    snprintf(train, sizeof train, "eval_%s_train.csv", net);
    snprintf(test, sizeof test, "eval_%s_test.csv", net);
    copy_eval_fixture(&D, train);
    copy_eval_fixture(&D, test);
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/%s\",\"test\":\"%s/%s\",\"header\":false},"
             "\"model\":{\"type\":\"mlp\",\"hidden\":[16],\"activation\":\"relu\",\"outputs\":%d},"
             "\"loss\":\"%s\",\"optimizer\":{\"type\":\"adam\",\"lr\":0.01},\"batch_size\":64,"
             "\"iterations\":10,\"eval_every\":3,\"dtype\":\"float64\",\"seed\":0}",
             D.dir, train, D.dir, test, outputs, loss);
    submit_job(&D, spec, id, sizeof id);
    expect_succeeded(id);
    double want[4], want_loss[10];
    snprintf(rec, sizeof rec, "%s_eval_loss", net);
    torch_ref_read("TRAIND_EVAL_TORCH", rec, want, 4);
    snprintf(rec, sizeof rec, "%s_loss", net);
    torch_ref_read("TRAIND_EVAL_TORCH", rec, want_loss, 10);
    json_t *m = metrics_of(id, "");
    size_t ec = metrics_column(m, "eval_loss"), lc = metrics_column(m, "loss");
    json_t *rows = json_object_get(m, "rows");
    cr_assert_eq(json_array_size(rows), 10);
    const int at[4] = {2, 5, 8, 9};
    for (int i = 0, k = 0; i < 10; i++) {
        json_t *row = json_array_get(rows, (size_t)i);
        expect_close(json_number_value(json_array_get(row, lc)), want_loss[i], "training loss", i);
        if (k < 4 && i == at[k])
            expect_close(json_number_value(json_array_get(row, ec)), want[k++], "eval_loss", i);
        else
            cr_expect(json_is_null(json_array_get(row, ec)), "eval_loss after iteration %d", i);
    }
    json_decref(m);
}

Test(eval, an_mlp_classifiers_cross_entropy_on_the_test_set_equals_pytorchs)
{
    expect_network_evals("ce", "cross_entropy", 3);
}

Test(eval, an_mlps_bce_on_the_test_set_equals_pytorchs)
{
    expect_network_evals("bce", "bce", 1);
}

/* A test set with a non-numeric field at line 3, column 2 of bad-test.csv. */
static void write_bad_test_csv(void)
{
    char path[400];
    snprintf(path, sizeof path, "%s/bad-test.csv", D.dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("1.5,1,2,3,4,5,6,7,8\n2.5,1,2,3,4,5,6,7,8\n3.5,@x7@,2,3,4,5,6,7,8\n", f);
    cr_assert_eq(fclose(f), 0);
}

Test(eval, a_bad_test_csv_fails_the_job_with_invalid_data_naming_the_test_file_line_and_column)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 2));
    write_bad_test_csv();
    char spec[1024], id[64];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\",\"test\":\"%s/bad-test.csv\"},"
             "\"clip_grad_norm\":0.5,\"batch_size\":256,\"iterations\":6,\"eval_every\":3}", D.dir, D.dir);
    submit_job(&D, spec, id, sizeof id);
    json_t *job = wait_job_done(&D, id, 60);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "failed");
    json_t *err = json_object_get(job, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "invalid_data");
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_assert_not_null(msg);
    cr_expect_not_null(strstr(msg, "data.test"), "message says it is the test set: %s", msg);
    cr_expect_not_null(strstr(msg, "bad-test.csv"), "message names the file: %s", msg);
    cr_expect_not_null(strstr(msg, "line 3"), "message names the line: %s", msg);
    cr_expect_not_null(strstr(msg, "column 2"), "message names the column: %s", msg);
    /* @ is in no path mkdtemp makes, so only the field itself could put "@x7@" in the message. */
    cr_expect_null(strstr(msg, "@x7@"), "message never echoes file contents: %s", msg);
    json_decref(job);
    /* The iterations before the failed evaluation kept their rows. */
    json_t *m = metrics_of(id, "");
    cr_expect_eq(json_array_size(json_object_get(m, "rows")), 3);
    json_decref(m);
}

Test(eval, a_test_set_with_other_columns_than_the_training_set_fails_with_invalid_data)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 2));
    char path[400], spec[1024], id[64];
    snprintf(path, sizeof path, "%s/narrow.csv", D.dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("1.5,1,2\n2.5,3,4\n", f);
    cr_assert_eq(fclose(f), 0);
    snprintf(spec, sizeof spec, "{\"data\":{\"train\":\"%s/dev/part*.csv\",\"test\":\"%s\"},\"iterations\":2}",
             D.dir, path);
    submit_job(&D, spec, id, sizeof id);
    json_t *job = wait_job_done(&D, id, 60);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "failed");
    json_t *err = json_object_get(job, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "invalid_data");
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_expect(msg && strstr(msg, "data.test") && strstr(msg, "2 feature columns"), "%s", msg);
    json_decref(job);
}

Test(eval, a_test_set_outside_the_data_roots_fails_the_job_with_auth_failed)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 2));
    char spec[1024], id[64];
    snprintf(spec, sizeof spec, "{\"data\":{\"train\":\"%s/dev/part*.csv\",\"test\":\"/etc/host*\"},"
             "\"iterations\":2}", D.dir);
    submit_job(&D, spec, id, sizeof id);
    json_t *job = wait_job_done(&D, id, 60);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "failed");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(job, "error"), "code")), "auth_failed",
                     "%s", json_string_value(json_object_get(json_object_get(job, "error"), "message")));
    json_decref(job);
}

Test(eval, eval_every_without_data_test_is_400_naming_the_field)
{
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json",
                   "{\"data\":{\"train\":\"d.csv\"},\"iterations\":5,\"eval_every\":2}", &r));
    cr_expect_eq(r.status, 400, "%s", r.body);
    cr_expect_str_eq(reply_error_code(&r), "invalid_spec");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(r.json, "error"), "field")),
                     "eval_every");
    http_reply_free(&r);
}

/* Writes the data of long_job (once: a job may be reading it). */
static void long_job_data(void)
{
    cr_assert(gen_dctaxi(&D, "dev", 3000, 2));
    cr_assert(gen_dctaxi_seed(&D, "test", 700, 2, 1));
}

/* A long job of small batches on a small test set, evaluated every 50 iterations. */
static const char *long_job(int iterations)
{
    static char spec[1024];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\",\"test\":\"%s/test/part*.csv\"},"
             "\"clip_grad_norm\":0.5,\"batch_size\":64,\"iterations\":%d,\"eval_every\":50}",
             D.dir, D.dir, iterations);
    return spec;
}

Test(eval, a_running_job_exports_its_latest_eval_loss_to_prometheus)
{
    char id[64], series[128];
    long_job_data();
    submit_job(&D, long_job(100000000), id, sizeof id);
    wait_job_iterations(&D, id, 120);
    struct http_reply r;
    cr_assert(http(&D, "GET", "/metrics", NULL, NULL, &r));
    cr_assert_eq(r.status, 200);
    snprintf(series, sizeof series, "traind_job_eval_loss{job=\"%s\"} ", id);
    const char *line = strstr(r.body, series);
    cr_expect_not_null(line, "%s", r.body);
    cr_expect_not_null(strstr(r.body, "# TYPE traind_job_eval_loss gauge"));
    if (line)
        cr_expect_gt(strtod(line + strlen(series), NULL), 0);
    http_reply_free(&r);
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s/cancel", id);
    cr_assert(http(&D, "POST", path, NULL, NULL, &r));
    http_reply_free(&r);
    json_decref(wait_job_done(&D, id, 60));
}

/* SIGTERM, a clean exit, and a new traind on the same state directory. */
static void restart(void)
{
    int status = daemon_stop(&D, 30);
    if (status != 0)
        daemon_print_log(&D);
    cr_assert_eq(status, 0, "traind exited with %d on SIGTERM", status);
    cr_assert(daemon_spawn(&D, NULL), "traind did not start again");
}

/* The eval_loss column of a finished job's n rows (NAN where null), checking one row per iteration. */
static void eval_losses(const char *id, double *out, size_t n)
{
    json_t *m = metrics_of(id, "?limit=100000");
    size_t ec = metrics_column(m, "eval_loss");
    json_t *rows = json_object_get(m, "rows");
    cr_assert_eq(json_array_size(rows), n, "job %s has %zu rows, not %zu", id, json_array_size(rows), n);
    for (size_t i = 0; i < n; i++) {
        json_t *row = json_array_get(rows, i);
        cr_assert_eq(json_integer_value(json_array_get(row, 0)), (json_int_t)i);
        json_t *v = json_array_get(row, ec);
        out[i] = json_is_number(v) ? json_number_value(v) : NAN;
    }
    json_decref(m);
}

Test(eval, eval_loss_survives_a_restart)
{
    char id[64];
    submit_job(&D, fixture_job("\"eval_every\":5"), id, sizeof id);
    expect_succeeded(id);
    static double before[ITERS], after[ITERS];
    eval_losses(id, before, ITERS);
    restart();
    eval_losses(id, after, ITERS);
    for (size_t i = 0; i < ITERS; i++)
        cr_expect(memcmp(&before[i], &after[i], sizeof before[i]) == 0 || (isnan(before[i]) && isnan(after[i])),
                  "iteration %zu: %.17g before the restart, %.17g after", i, before[i], after[i]);
    cr_expect(!isnan(after[4]) && isnan(after[5]));
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *job = get_json(&D, path, 200);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(job, "metrics"), "eval_iteration")), ITERS - 1);
    cr_expect_eq(json_number_value(json_object_get(json_object_get(job, "metrics"), "eval_loss")), after[ITERS - 1]);
    json_decref(job);
}

Test(eval, a_job_stopped_by_sigterm_goes_on_with_an_uninterrupted_runs_eval_losses)
{
    enum { N = 20000 };
    char id[64], twin[64], line[128];
    long_job_data();
    submit_job(&D, long_job(N), id, sizeof id);
    wait_job_iterations(&D, id, 60);
    restart();
    snprintf(line, sizeof line, "job %s stopped for shutdown", id);
    cr_assert(daemon_log_contains(&D, line), "the job had ended before SIGTERM; nothing was tested");
    submit_job(&D, long_job(N), twin, sizeof twin);
    expect_succeeded(id);
    expect_succeeded(twin);
    static double a[N], b[N];
    eval_losses(id, a, N);
    eval_losses(twin, b, N);
    for (size_t i = 0; i < N; i++) {
        bool due = (i + 1) % 50 == 0 || i + 1 == N;
        cr_assert_eq(!isnan(a[i]), due, "iteration %zu: eval_loss %g", i, a[i]);
        if (due)
            cr_assert_eq(a[i], b[i], "iteration %zu: %.17g after the restart, %.17g uninterrupted", i, a[i], b[i]);
    }
}

Test(eval, a_cancel_during_evaluations_leaves_no_row_without_its_eval_loss)
{
    /* Evaluating 200000 rows after every step of 64: a cancel almost always lands in an evaluation. */
    cr_assert(gen_dctaxi(&D, "dev", 3000, 2));
    cr_assert(gen_dctaxi_seed(&D, "test", 200000, 2, 1));
    char spec[1024], id[64], path[128];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\",\"test\":\"%s/test/part*.csv\"},"
             "\"clip_grad_norm\":0.5,\"batch_size\":64,\"iterations\":1000000,\"eval_every\":1}", D.dir, D.dir);
    submit_job(&D, spec, id, sizeof id);
    wait_job_iterations(&D, id, 3);
    struct http_reply r;
    snprintf(path, sizeof path, "/jobs/%s/cancel", id);
    cr_assert(http(&D, "POST", path, NULL, NULL, &r));
    http_reply_free(&r);
    json_t *job = wait_job_done(&D, id, 60);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "cancelled");
    long long done = json_integer_value(json_object_get(json_object_get(job, "progress"), "iteration"));
    json_decref(job);
    static double ev[100000];
    cr_assert_lt(done, 100000);
    eval_losses(id, ev, (size_t)done);
    for (long long i = 0; i < done; i++)
        cr_expect(!isnan(ev[i]), "iteration %lld has a row without its eval_loss", i);
}
