/* test_daemon.c — the real traind on a loopback port: training a job end to end and the API's errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"
#include "torch_ref.h"

static struct daemon_proc D;

static void setup(void)
{
    cr_assert(daemon_start(&D), "traind did not start (see its log under /tmp/traind-it-*)");
}

/* Every test ends with a clean shutdown, so leaks and sanitizer reports in traind fail it. */
static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(integration, .init = setup, .fini = teardown, .timeout = 240);

Test(integration, healthz_says_ok)
{
    struct http_reply r;
    cr_assert(http(&D, "GET", "/healthz", NULL, NULL, &r));
    cr_expect_eq(r.status, 200);
    cr_expect_str_eq(json_string_value(json_object_get(r.json, "status")), "ok");
    char ct[64];
    cr_expect_str_eq(http_header(&r, "Content-Type", ct, sizeof ct), "application/json");
    http_reply_free(&r);
}

Test(integration, baseline_job_trains_to_pytorchs_losses_falling_a_hundredfold)
{
    cr_assert(gen_dctaxi(&D, "dev", 200000, 4));   /* batches of 65536 span the 4 partitions */
    char train[512], id[64];
    snprintf(train, sizeof train, "file://%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 50, 65536), id, sizeof id);

    json_t *job = wait_job_done(&D, id, 180);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "error: %s",
                     json_string_value(json_object_get(json_object_get(job, "error"), "message")));
    json_t *params = json_object_get(job, "parameters");
    cr_expect_eq(json_array_size(json_object_get(params, "w")), 8, "w is 8x1 for 8 features");
    cr_expect_eq(json_array_size(json_object_get(params, "b")), 1);
    json_decref(job);

    char path[128];
    snprintf(path, sizeof path, "/jobs/%s/metrics", id);
    struct http_reply r;
    cr_assert(http(&D, "GET", path, NULL, NULL, &r));
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *cols = json_object_get(r.json, "columns");
    cr_assert_str_eq(json_string_value(json_array_get(cols, 0)), "iteration");
    cr_assert_str_eq(json_string_value(json_array_get(cols, 2)), "loss");
    json_t *rows = json_object_get(r.json, "rows");
    cr_assert_eq(json_array_size(rows), 50);
    for (size_t i = 0; i < 50; i++) {
        json_t *row = json_array_get(rows, i);
        cr_expect_eq(json_integer_value(json_array_get(row, 0)), (json_int_t)i);
        for (size_t c = 1; c < json_array_size(cols); c++)
            if (strcmp(json_string_value(json_array_get(cols, c)), "eval_loss") == 0)
                cr_expect(json_is_null(json_array_get(row, c)), "row %zu has an eval_loss without data.test", i);
            else
                cr_expect(json_is_number(json_array_get(row, c)) &&
                          isfinite(json_number_value(json_array_get(row, c))),
                          "row %zu column %zu is not a finite number", i, c);
    }
    double first = json_number_value(json_array_get(json_array_get(rows, 0), 2));
    double last = json_number_value(json_array_get(json_array_get(rows, 49), 2));
    cr_expect_lt(last, first / 100, "loss %g at iteration 0, %g at 49", first, last);
    cr_expect_eq(json_integer_value(json_object_get(r.json, "next_since")), 50);

    /* Same data, init and batch order as PyTorch: the same losses, to float rounding. */
    expect_torch_losses(rows, "loss");
    http_reply_free(&r);
}

Test(integration, metrics_page_from_since_with_limit)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 2));
    char train[512], id[64], path[160];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 10, 512), id, sizeof id);
    json_decref(wait_job_done(&D, id, 60));
    snprintf(path, sizeof path, "/jobs/%s/metrics?since=4&limit=3", id);
    struct http_reply r;
    cr_assert(http(&D, "GET", path, NULL, NULL, &r));
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *rows = json_object_get(r.json, "rows");
    cr_assert_eq(json_array_size(rows), 3);
    cr_expect_eq(json_integer_value(json_array_get(json_array_get(rows, 0), 0)), 4);
    cr_expect_eq(json_integer_value(json_object_get(r.json, "next_since")), 7);
    http_reply_free(&r);
}

Test(integration, bad_spec_is_400_naming_the_field)
{
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json",
                   "{\"data\":{\"train\":\"x.csv\"},\"optimizer\":{\"type\":\"sgd\",\"lr\":-1},"
                   "\"iterations\":5}", &r));
    cr_expect_eq(r.status, 400);
    cr_expect_str_eq(reply_error_code(&r), "invalid_spec");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(r.json, "error"), "field")),
                     "optimizer.lr");
    http_reply_free(&r);
}

Test(integration, malformed_json_is_400_with_line_and_column)
{
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", "{\"data\":\n  {\"train\": }", &r));
    cr_expect_eq(r.status, 400);
    cr_expect_str_eq(reply_error_code(&r), "invalid_json");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(r.json, "error"), "line")), 2);
    http_reply_free(&r);
}

Test(integration, body_that_is_not_json_typed_is_415)
{
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/x-www-form-urlencoded", "{}", &r));
    cr_expect_eq(r.status, 415);
    cr_expect_str_eq(reply_error_code(&r), "unsupported_media_type");
    http_reply_free(&r);
}

Test(integration, body_over_one_mebibyte_is_413)
{
    size_t n = 1024 * 1024 + 100;
    char *big = malloc(n + 1);
    cr_assert_not_null(big);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    big[n] = '\0';
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", big, &r));
    cr_expect_eq(r.status, 413);
    cr_expect_str_eq(reply_error_code(&r), "payload_too_large");
    http_reply_free(&r);
    free(big);
}

Test(integration, unknown_path_is_404_json)
{
    struct http_reply r;
    cr_assert(http(&D, "GET", "/nope", NULL, NULL, &r));
    cr_expect_eq(r.status, 404);
    cr_expect_str_eq(reply_error_code(&r), "not_found");
    http_reply_free(&r);
    cr_assert(http(&D, "GET", "/jobs/0123456789abcdef", NULL, NULL, &r));
    cr_expect_eq(r.status, 404);
    cr_expect_str_eq(reply_error_code(&r), "not_found");
    http_reply_free(&r);
}

Test(integration, wrong_method_is_405_with_allow)
{
    struct http_reply r;
    cr_assert(http(&D, "DELETE", "/jobs", NULL, NULL, &r));
    cr_expect_eq(r.status, 405);
    cr_expect_str_eq(reply_error_code(&r), "method_not_allowed");
    char allow[64];
    cr_expect_str_eq(http_header(&r, "Allow", allow, sizeof allow), "GET, HEAD, POST");
    http_reply_free(&r);
}

Test(integration, csv_with_a_non_numeric_field_fails_the_job_with_invalid_data)
{
    char path[400];
    snprintf(path, sizeof path, "%s/bad.csv", D.dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("1.5,1,2\n2.5,3,4\n3.5,x7,6\n", f);
    cr_assert_eq(fclose(f), 0);
    char train[512], id[64];
    snprintf(train, sizeof train, "%s/bad.csv", D.dir);
    submit_job(&D, baseline_spec(train, 5, 2), id, sizeof id);
    json_t *job = wait_job_done(&D, id, 60);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "failed");
    json_t *err = json_object_get(job, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "invalid_data");
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_assert_not_null(msg);
    cr_expect_not_null(strstr(msg, "bad.csv"), "message names the file: %s", msg);
    cr_expect_not_null(strstr(msg, "line 3"), "message names the line: %s", msg);
    cr_expect_not_null(strstr(msg, "column 2"), "message names the column: %s", msg);
    cr_expect_null(strstr(msg, "x7"), "message never echoes file contents: %s", msg);
    json_decref(job);

    struct http_reply r;   /* and the daemon keeps serving */
    cr_assert(http(&D, "GET", "/healthz", NULL, NULL, &r));
    cr_expect_eq(r.status, 200);
    http_reply_free(&r);
}

Test(integration, jobs_list_is_newest_first_and_filters_by_state)
{
    char id1[64], id2[64];
    submit_job(&D, baseline_spec("missing/part*.csv", 1, 1), id1, sizeof id1);
    submit_job(&D, baseline_spec("missing/part*.csv", 1, 1), id2, sizeof id2);
    json_decref(wait_job_done(&D, id1, 30));
    json_decref(wait_job_done(&D, id2, 30));
    struct http_reply r;
    cr_assert(http(&D, "GET", "/jobs", NULL, NULL, &r));
    cr_assert_eq(r.status, 200);
    json_t *jobs = json_object_get(r.json, "jobs");
    cr_assert_eq(json_array_size(jobs), 2);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(jobs, 0), "id")), id2);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(jobs, 1), "id")), id1);
    http_reply_free(&r);
    cr_assert(http(&D, "GET", "/jobs?state=succeeded", NULL, NULL, &r));
    cr_expect_eq(json_array_size(json_object_get(r.json, "jobs")), 0);
    http_reply_free(&r);
    cr_assert(http(&D, "GET", "/jobs?state=bogus", NULL, NULL, &r));
    cr_expect_eq(r.status, 400);
    http_reply_free(&r);
}

Test(integration, same_client_id_returns_the_existing_job)
{
    const char *spec = "{\"client_id\":\"once\",\"data\":{\"train\":\"missing.csv\"},\"iterations\":1}";
    char id[64];
    submit_job(&D, spec, id, sizeof id);
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", spec, &r));
    cr_expect_eq(r.status, 200);
    cr_expect_str_eq(json_string_value(json_object_get(r.json, "id")), id);
    http_reply_free(&r);
}

Test(integration, same_client_id_with_another_spec_is_a_conflict_naming_the_job)
{
    char id[64];
    submit_job(&D, "{\"client_id\":\"twice\",\"data\":{\"train\":\"missing.csv\"},\"iterations\":1}", id,
               sizeof id);
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json",
                   "{\"client_id\":\"twice\",\"data\":{\"train\":\"missing.csv\"},\"iterations\":2}", &r));
    cr_expect_eq(r.status, 409, "%s", r.body);
    json_t *err = json_object_get(r.json, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "conflict");
    cr_expect_str_eq(json_string_value(json_object_get(err, "job")), id);
    http_reply_free(&r);
    json_t *list = get_json(&D, "/jobs", 200);
    cr_expect_eq(json_array_size(json_object_get(list, "jobs")), 1, "no second job");
    json_decref(list);
}

/* Waits until job id has completed at least one iteration. */
static void wait_training(const char *id)
{
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s", id);
    for (double t0 = now_s(); now_s() - t0 < 30;) {
        struct http_reply r;
        cr_assert(http(&D, "GET", path, NULL, NULL, &r));
        json_int_t it = json_integer_value(json_object_get(json_object_get(r.json, "progress"), "iteration"));
        http_reply_free(&r);
        if (it > 0)
            return;
        usleep(20 * 1000);
    }
    cr_assert_fail("job %s never started training", id);
}

Test(integration, cancel_stops_a_running_job_at_a_step_boundary)
{
    cr_assert(gen_dctaxi(&D, "dev", 5000, 1));
    char train[512], id[64], path[160];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 100000000, 64), id, sizeof id);
    wait_training(id);
    snprintf(path, sizeof path, "/jobs/%s/cancel", id);
    struct http_reply r;
    cr_assert(http(&D, "POST", path, NULL, NULL, &r));
    cr_expect_eq(r.status, 202, "%s", r.body);
    http_reply_free(&r);
    json_t *job = wait_job_done(&D, id, 30);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "cancelled");
    json_decref(job);
    cr_assert(http(&D, "POST", path, NULL, NULL, &r));
    cr_expect_eq(r.status, 409, "cancelling an ended job: %s", r.body);
    http_reply_free(&r);
}

Test(integration, sigterm_cancels_a_running_job_and_exits_zero_promptly)
{
    cr_assert(gen_dctaxi(&D, "dev", 5000, 1));
    char train[512], id[64];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 100000000, 64), id, sizeof id);
    wait_training(id);   /* so the shutdown has a job to stop */
    double t0 = now_s();
    int status = daemon_stop(&D, 20);
    cr_expect_eq(status, 0, "traind exited with %d", status);
    cr_expect_lt(now_s() - t0, 10.0, "stopping took %.1f s", now_s() - t0);
}

Test(integration, unclipped_sgd_diverges_and_fails_with_a_hint)
{
    /* The reference's warning: without clip_grad_norm the loss explodes on this data. */
    cr_assert(gen_dctaxi(&D, "dev", 4000, 2));
    char spec[600], id[64];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\"},\"optimizer\":{\"type\":\"sgd\",\"lr\":0.03},"
             "\"batch_size\":1000,\"iterations\":1000,\"seed\":8}", D.dir);
    submit_job(&D, spec, id, sizeof id);
    json_t *job = wait_job_done(&D, id, 60);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "failed");
    json_t *err = json_object_get(job, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "diverged");
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_expect(msg && strstr(msg, "clip_grad_norm"), "the message suggests clipping: %s", msg);
    cr_expect_lt(json_integer_value(json_object_get(json_object_get(job, "progress"), "iteration")), 1000);
    json_decref(job);
}

Test(integration, bad_flag_exits_2_with_the_usage_on_stderr)
{
    static char out[16384];
    const char *args[] = {"--no-such-flag", NULL};
    cr_expect_eq(run_traind(args, out, sizeof out), 2);
    cr_expect_not_null(strstr(out, "--no-such-flag"), "%s", out);
    cr_expect_not_null(strstr(out, "Usage:"), "%s", out);
}

Test(integration, help_exits_0_with_examples)
{
    static char out[16384];
    const char *args[] = {"--help", NULL};
    cr_expect_eq(run_traind(args, out, sizeof out), 0);
    cr_expect_not_null(strstr(out, "--data-root"), "%s", out);
    cr_expect_not_null(strstr(out, "Examples:"), "%s", out);
}

static double get_timed(const char *path, struct http_reply *r)
{
    double t0 = now_s();
    cr_assert(http(&D, "GET", path, NULL, NULL, r));
    return now_s() - t0;
}

Test(integration, metrics_wait_long_polls_until_a_row_arrives_or_time_is_up)
{
    cr_assert(gen_dctaxi(&D, "dev", 5000, 1));
    char train[512], a[64], b[64], path[200];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 100000000, 64), a, sizeof a);
    wait_training(a);
    submit_job(&D, baseline_spec(train, 100000000, 64), b, sizeof b);   /* queued behind a: one worker */

    struct http_reply r;
    snprintf(path, sizeof path, "/jobs/%s/metrics?wait=1", b);
    double took = get_timed(path, &r);
    cr_expect_eq(r.status, 200, "%s", r.body);
    cr_expect_eq(json_array_size(json_object_get(r.json, "rows")), 0);
    cr_expect_geq(took, 0.9, "answered after %.2f s, before the wait was up", took);
    cr_expect_lt(took, 10.0);
    http_reply_free(&r);

    snprintf(path, sizeof path, "/jobs/%s/cancel", a);
    cr_assert(http(&D, "POST", path, NULL, NULL, &r));
    http_reply_free(&r);
    snprintf(path, sizeof path, "/jobs/%s/metrics?since=0&wait=30", b);
    took = get_timed(path, &r);
    cr_expect_eq(r.status, 200, "%s", r.body);
    cr_expect_geq(json_array_size(json_object_get(r.json, "rows")), 1, "woken by b's first row");
    cr_expect_lt(took, 20.0, "the first row took %.2f s to arrive", took);
    http_reply_free(&r);

    snprintf(path, sizeof path, "/jobs/%s/metrics?wait=100", b);
    cr_assert(http(&D, "GET", path, NULL, NULL, &r));
    cr_expect_eq(r.status, 400, "wait is capped at 60 s");
    http_reply_free(&r);
}

Test(integration, delete_removes_an_ended_job_and_refuses_a_running_one)
{
    cr_assert(gen_dctaxi(&D, "dev", 5000, 1));
    char train[512], done[64], running[64], path[160];
    submit_job(&D, baseline_spec("missing/part*.csv", 1, 1), done, sizeof done);
    json_decref(wait_job_done(&D, done, 30));
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 100000000, 64), running, sizeof running);
    wait_training(running);

    struct http_reply r;
    snprintf(path, sizeof path, "/jobs/%s", running);
    cr_assert(http(&D, "DELETE", path, NULL, NULL, &r));
    cr_expect_eq(r.status, 409, "%s", r.body);
    http_reply_free(&r);

    snprintf(path, sizeof path, "/jobs/%s", done);
    cr_assert(http(&D, "DELETE", path, NULL, NULL, &r));
    cr_expect_eq(r.status, 200, "%s", r.body);
    http_reply_free(&r);
    cr_assert(http(&D, "GET", path, NULL, NULL, &r));
    cr_expect_eq(r.status, 404);
    http_reply_free(&r);
    cr_assert(http(&D, "GET", "/jobs", NULL, NULL, &r));
    cr_expect_eq(json_array_size(json_object_get(r.json, "jobs")), 1);
    http_reply_free(&r);
}

Test(integration, adam_job_trains_to_pytorchs_losses)
{
    cr_assert(gen_dctaxi(&D, "dev", 200000, 4));
    char spec[600], id[64], path[128];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\"},\"optimizer\":{\"type\":\"adam\",\"lr\":0.1},"
             "\"batch_size\":65536,\"iterations\":50,\"seed\":0}", D.dir);
    submit_job(&D, spec, id, sizeof id);
    json_t *job = wait_job_done(&D, id, 180);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
    json_decref(job);
    snprintf(path, sizeof path, "/jobs/%s/metrics", id);
    struct http_reply r;
    cr_assert(http(&D, "GET", path, NULL, NULL, &r));
    json_t *rows = json_object_get(r.json, "rows");
    cr_assert_eq(json_array_size(rows), 50);
    expect_torch_losses(rows, "adam_loss");
    http_reply_free(&r);
}

/*
 * A partition cut short while the job reads it: 25M rows (200 MB), truncated mid-row 150 ms after the
 * job is accepted, while the daemon counts and parses them. The job fails naming the file, and the
 * daemon, which once mapped the file and died of SIGBUS here, goes on serving.
 */
Test(integration, a_partition_truncated_while_a_job_reads_it_fails_that_job_and_nothing_else)
{
    char dir[400], path[450], train[512], id[64];
    write_partition(&D, "shrinks", "", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/part-00000.csv", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    static char block[8 << 20];
    for (size_t i = 0; i < sizeof block; i += 8)
        memcpy(block + i, "1.5,1,2\n", 8);
    for (int i = 0; i < 25; i++)
        cr_assert_eq(fwrite(block, 1, sizeof block, f), sizeof block);
    cr_assert_eq(fclose(f), 0);
    snprintf(train, sizeof train, "%s/part-*.csv", dir);
    submit_job(&D, baseline_spec(train, 5, 1024), id, sizeof id);
    usleep(150 * 1000);
    cr_assert_eq(truncate(path, 4099), 0); /* mid-row, so no reading of it can pass for whole */
    json_t *job = wait_job_done(&D, id, 120);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "failed");
    json_t *err = json_object_get(job, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "invalid_data");
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_expect(msg && strstr(msg, "part-00000.csv"), "message names the file: %s", msg ? msg : "(none)");
    json_decref(job);
    json_decref(get_json(&D, "/healthz", 200));
}

/* A failed job's message names its file relative to the data root: the client is not shown server paths. */
Test(integration, a_bad_partition_is_named_relative_to_the_data_root)
{
    char dir[400], train[512], id[64];
    write_partition(&D, "ragged", "1.5,1,2\n2.5,1\n", dir, sizeof dir);
    snprintf(train, sizeof train, "%s/part-*.csv", dir);
    submit_job(&D, baseline_spec(train, 2, 8), id, sizeof id);
    char *msg = job_failure(&D, id, "invalid_data", 60);
    cr_expect_not_null(strstr(msg, "ragged/part-00000.csv"), "the file is named: %s", msg);
    cr_expect_null(strstr(msg, D.dir), "the server's path is not shown: %s", msg);
    free(msg);
}
