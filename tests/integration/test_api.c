/* test_api.c — the API past submit-and-watch: pause/resume, paging, downsampling, predict, devices, metrics. */
#include <criterion/criterion.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"

static struct daemon_proc D;

static void setup(void)
{
    cr_assert(daemon_start(&D), "traind did not start (see its log under /tmp/traind-it-*)");
}

static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(api, .init = setup, .fini = teardown, .timeout = 240);

static long post(const char *path, const char *body, struct http_reply *r)
{
    cr_assert(http(&D, "POST", path, body ? "application/json" : NULL, body, r), "POST %s", path);
    return r->status;
}

/* A job that trains until stopped, on a small dataset. */
static void long_job(char *id, size_t cap)
{
    char train[512];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 100000000, 64), id, cap);
}

static void control(const char *id, const char *verb, long want)
{
    char path[128];
    struct http_reply r;
    snprintf(path, sizeof path, "/jobs/%s/%s", id, verb);
    cr_expect_eq(post(path, NULL, &r), want, "%s: %s", path, r.body);
    if (want == 409)
        cr_expect_str_eq(reply_error_code(&r), "conflict");
    http_reply_free(&r);
}

Test(api, pause_frees_the_worker_and_resume_requeues)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 1));
    char a[64], b[64], path[128];
    long_job(a, sizeof a);
    wait_job_iterations(&D, a, 1);
    long_job(b, sizeof b);   /* queued behind a: one worker */
    control(a, "pause", 202);
    wait_job_state(&D, a, "paused", 30);
    wait_job_state(&D, b, "running", 30);   /* the worker a held went to b */
    snprintf(path, sizeof path, "/jobs/%s", a);
    json_t *job = get_json(&D, path, 200);
    cr_expect(json_is_null(json_object_get(job, "device")), "a paused job holds no device");
    json_decref(job);
    control(a, "pause", 409);
    control(b, "resume", 409);
    control(a, "resume", 202);
    wait_job_state(&D, a, "queued", 10);
    control(b, "cancel", 202);
    wait_job_iterations(&D, a, 1);
    control(a, "cancel", 202);
    json_decref(wait_job_done(&D, a, 30));
}

Test(api, a_queued_job_pauses_at_once_and_a_paused_job_can_be_cancelled)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 1));
    char a[64], b[64];
    long_job(a, sizeof a);
    wait_job_iterations(&D, a, 1);
    long_job(b, sizeof b);
    control(b, "pause", 202);
    wait_job_state(&D, b, "paused", 1);
    control(b, "cancel", 202);
    wait_job_state(&D, b, "cancelled", 1);
    control(a, "cancel", 202);
}

Test(api, jobs_list_pages_with_after)
{
    char id[5][64];
    for (int i = 0; i < 5; i++)
        submit_job(&D, baseline_spec("missing/part*.csv", 1, 1), id[i], sizeof id[i]);
    json_t *p1 = get_json(&D, "/jobs?limit=2", 200);
    json_t *jobs = json_object_get(p1, "jobs");
    cr_assert_eq(json_array_size(jobs), 2);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(jobs, 0), "id")), id[4]);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(jobs, 1), "id")), id[3]);
    const char *next = json_string_value(json_object_get(p1, "next_after"));
    cr_assert_not_null(next);
    cr_expect_str_eq(next, id[3]);
    char path[128];
    snprintf(path, sizeof path, "/jobs?limit=2&after=%s", next);
    json_t *p2 = get_json(&D, path, 200);
    jobs = json_object_get(p2, "jobs");
    cr_assert_eq(json_array_size(jobs), 2);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(jobs, 0), "id")), id[2]);
    snprintf(path, sizeof path, "/jobs?limit=2&after=%s", id[1]);
    json_t *p3 = get_json(&D, path, 200);
    cr_expect_eq(json_array_size(json_object_get(p3, "jobs")), 1);
    cr_expect(json_is_null(json_object_get(p3, "next_after")), "the last page says there is no more");
    json_decref(p1);
    json_decref(p2);
    json_decref(p3);
    json_t *bad = get_json(&D, "/jobs?after=0000000000000000", 400);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(bad, "error"), "code")),
                     "invalid_argument");
    json_decref(bad);
}

static double loss_of(json_t *row)
{
    return json_number_value(json_array_get(row, 2));
}

Test(api, max_points_keeps_first_last_lowest_and_highest_loss)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 2));
    char train[512], id[64], path[160];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 400, 64), id, sizeof id);
    json_decref(wait_job_done(&D, id, 60));
    snprintf(path, sizeof path, "/jobs/%s/metrics", id);
    json_t *all = get_json(&D, path, 200);
    json_t *rows = json_object_get(all, "rows");
    cr_assert_eq(json_array_size(rows), 400);
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < 400; i++) {
        lo = fmin(lo, loss_of(json_array_get(rows, i)));
        hi = fmax(hi, loss_of(json_array_get(rows, i)));
    }
    snprintf(path, sizeof path, "/jobs/%s/metrics?max_points=40", id);
    json_t *some = get_json(&D, path, 200);
    json_t *kept = json_object_get(some, "rows");
    size_t n = json_array_size(kept);
    cr_expect_leq(n, 40);
    cr_expect_geq(n, 10);
    cr_expect_eq(json_integer_value(json_array_get(json_array_get(kept, 0), 0)), 0);
    cr_expect_eq(json_integer_value(json_array_get(json_array_get(kept, n - 1), 0)), 399);
    int has_lo = 0, has_hi = 0;
    for (size_t i = 0; i < n; i++) {
        has_lo |= loss_of(json_array_get(kept, i)) == lo;
        has_hi |= loss_of(json_array_get(kept, i)) == hi;
        if (i)
            cr_expect_gt(json_integer_value(json_array_get(json_array_get(kept, i), 0)),
                         json_integer_value(json_array_get(json_array_get(kept, i - 1), 0)));
    }
    cr_expect(has_lo, "the lowest loss survives the downsampling");
    cr_expect(has_hi, "the highest loss survives the downsampling");
    cr_expect_eq(json_integer_value(json_object_get(some, "next_since")), 400);
    json_decref(all);
    json_decref(some);
    snprintf(path, sizeof path, "/jobs/%s/metrics?max_points=3", id);
    json_decref(get_json(&D, path, 400));
}

Test(api, a_running_job_has_an_eta)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 1));
    char train[512], id[64], path[128];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 50000000, 64), id, sizeof id);
    wait_job_iterations(&D, id, 10);
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *job = get_json(&D, path, 200);
    json_t *eta = json_object_get(json_object_get(job, "progress"), "eta_s");
    cr_expect(json_is_number(eta) && json_number_value(eta) > 0, "eta_s of a running job");
    json_decref(job);
    control(id, "cancel", 202);
    job = wait_job_done(&D, id, 30);
    cr_expect(json_is_null(json_object_get(json_object_get(job, "progress"), "eta_s")));
    json_decref(job);
}

Test(api, predict_applies_the_trained_model_to_rows)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 2));
    char train[512], id[64], path[128];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 20, 256), id, sizeof id);
    json_t *job = wait_job_done(&D, id, 60);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
    json_t *w = json_object_get(json_object_get(job, "parameters"), "w");
    double b = json_number_value(json_array_get(json_array_get(json_object_get(json_object_get(job, "parameters"), "b"), 0), 0));
    cr_assert_eq(json_array_size(w), 8);
    static const double x[2][8] = {{38.9, -77.0, 38.91, -77.02, 2017, 3, 2, 14},
                                   {38.85, -77.1, 38.8, -77.0, 2016, 12, 6, 1}};
    const char *body = "{\"rows\":[[38.9,-77.0,38.91,-77.02,2017,3,2,14],"
                       "[38.85,-77.1,38.8,-77.0,2016,12,6,1]]}";
    snprintf(path, sizeof path, "/jobs/%s/predict", id);
    struct http_reply r;
    cr_assert_eq(post(path, body, &r), 200, "%s", r.body);
    json_t *pred = json_object_get(r.json, "predictions");
    cr_assert_eq(json_array_size(pred), 2);
    for (int i = 0; i < 2; i++) {
        double want = b;
        for (int k = 0; k < 8; k++)
            want += x[i][k] * json_number_value(json_array_get(json_array_get(w, (size_t)k), 0));
        double got = json_number_value(json_array_get(pred, (size_t)i));
        cr_expect(fabs(got - want) <= 1e-9 * fmax(1, fabs(want)), "row %d: %.17g, X @ w + b is %.17g",
                  i, got, want);
    }
    http_reply_free(&r);
    json_decref(job);
}

Test(api, predict_refuses_bad_rows_and_unfinished_jobs)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 1));
    char train[512], id[64], path[128];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 5, 64), id, sizeof id);
    json_decref(wait_job_done(&D, id, 60));
    snprintf(path, sizeof path, "/jobs/%s/predict", id);
    static const char *const bad[] = {
        "{\"rows\":[[1,2,3]]}",                        /* 3 values, the model takes 8 */
        "{\"rows\":[]}",
        "{\"rows\":[[1,2,3,4,5,6,7,\"8\"]]}",
        "{\"rows\":[1,2,3,4,5,6,7,8]}",
        "{\"data\":[[1,2,3,4,5,6,7,8]]}",
    };
    struct http_reply r;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_expect_eq(post(path, bad[i], &r), 400, "%s -> %s", bad[i], r.body);
        cr_expect_str_eq(reply_error_code(&r), "invalid_argument");
        http_reply_free(&r);
    }
    cr_assert(post(path, "{\"rows\":[[1,2,3]]}", &r) == 400);
    const char *msg = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
    cr_expect(msg && strstr(msg, "8"), "the message says how wide a row must be: %s", msg);
    http_reply_free(&r);
    cr_assert(http(&D, "POST", path, "text/plain", "{\"rows\":[[1]]}", &r));
    cr_expect_eq(r.status, 415);
    http_reply_free(&r);

    char running[64];
    long_job(running, sizeof running);
    snprintf(path, sizeof path, "/jobs/%s/predict", running);
    cr_expect_eq(post(path, "{\"rows\":[[1,2,3,4,5,6,7,8]]}", &r), 409, "%s", r.body);
    http_reply_free(&r);
    control(running, "cancel", 202);
}

/* A succeeded job whose model (JSON) takes one feature; its id into id. */
static void one_feature_job(const char *name, const char *model, char *id, size_t cap)
{
    char text[2048] = "", dir[512], spec[1024];
    for (int i = 0; i < 64; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%d.5,%d\n", i % 7, i);
    write_partition(&D, name, text, dir, sizeof dir);
    snprintf(spec, sizeof spec, "{\"data\":{\"train\":\"%s/part*.csv\"},\"model\":%s,\"loss\":\"mse\","
             "\"batch_size\":8,\"iterations\":1,\"dtype\":\"float32\",\"seed\":0}", dir, model);
    submit_job(&D, spec, id, cap);
    json_t *job = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
    json_decref(job);
}

/* {"rows":[[0.5],[0.5],...]} with n rows (malloc'd). */
static char *one_feature_rows(size_t n)
{
    char *body = malloc(16 + 6 * n);
    cr_assert_not_null(body);
    strcpy(body, "{\"rows\":[");
    size_t len = strlen(body);
    for (size_t i = 0; i < n; i++) {
        memcpy(body + len, i ? ",[0.5]" : "[0.5]", i ? 6 : 5);
        len += i ? 6 : 5;
    }
    strcpy(body + len, "]}");
    return body;
}

Test(api, predict_with_more_rows_than_the_limit_is_413_naming_it)
{
    char id[64], path[128];
    one_feature_job("limit", "{\"type\":\"linear\"}", id, sizeof id);
    snprintf(path, sizeof path, "/jobs/%s/predict", id);
    char *body = one_feature_rows(100001);   /* the default --predict-max-rows is 100000 */
    struct http_reply r;
    cr_assert_eq(post(path, body, &r), 413, "%.200s", r.body);
    json_t *err = json_object_get(r.json, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "payload_too_large");
    cr_expect_eq(json_integer_value(json_object_get(err, "limit")), 100000, "%s", r.body);
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_expect(msg && strstr(msg, "100000") && strstr(msg, "--predict-max-rows"), "%s", msg);
    http_reply_free(&r);
    strcpy(body + strlen(body) - 8, "]}");     /* one row fewer: at the limit */
    cr_expect_eq(post(path, body, &r), 200, "%.200s", r.body);
    cr_expect_eq(json_array_size(json_object_get(r.json, "predictions")), 100000);
    http_reply_free(&r);
    free(body);
}

/*
 * Sends a prediction of 100000 rows through a 512x512 MLP (seconds of work) and does not
 * wait for the answer; the connection, to read it from.
 */
static int start_large_prediction(void)
{
    char id[64], path[128], head[256];
    one_feature_job("wide", "{\"type\":\"mlp\",\"hidden\":[512,512]}", id, sizeof id);
    snprintf(path, sizeof path, "/jobs/%s/predict", id);
    char *body = one_feature_rows(100000);
    int fd = raw_connect(&D);
    cr_assert_geq(fd, 0);
    snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n", path, strlen(body));
    cr_assert_eq(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
    cr_assert_eq(send(fd, body, strlen(body), MSG_NOSIGNAL), (ssize_t)strlen(body));
    free(body);
    sleep_ms(200);   /* the prediction has begun */
    return fd;
}

/*
 * The prediction runs off the loop thread: /healthz is answered while a large one is still
 * computing (before, the loop computed it and /healthz waited for it to end).
 */
Test(api, healthz_answers_while_a_large_prediction_runs)
{
    int fd = start_large_prediction();
    struct http_reply r;
    cr_assert(http(&D, "GET", "/healthz", NULL, NULL, &r));
    cr_expect_eq(r.status, 200);
    http_reply_free(&r);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    cr_expect_eq(poll(&p, 1, 0), 0, "the prediction ended before /healthz was answered: make it larger");
    cr_expect_eq(raw_read_status(fd, 200), 200);
    close(fd);
}

/* The request's deadline covers its arrival, not the work: a slow prediction is still answered. */
Test(api, a_prediction_that_takes_longer_than_the_request_timeout_is_answered)
{
    const char *extra[] = {"--request-timeout", "1", NULL};
    cr_assert_eq(daemon_stop(&D, 20), 0);
    cr_assert(daemon_spawn(&D, extra), "traind did not start with --request-timeout 1");
    int fd = start_large_prediction();
    double t0 = now_s();
    cr_expect_eq(raw_read_status(fd, 200), 200);
    cr_expect_gt(now_s() - t0, 1.0, "the prediction took less than the timeout: make it larger");
    close(fd);
}

Test(api, sigterm_during_a_prediction_exits_cleanly)
{
    int fd = start_large_prediction();
    int status = daemon_stop(&D, 120);
    close(fd);
    if (status != 0)
        daemon_print_log(&D);
    cr_expect_eq(status, 0, "traind exited with %d while a prediction ran", status);
    cr_assert(daemon_spawn(&D, NULL), "traind did not start again");   /* for the teardown */
}

Test(api, a_job_that_never_ran_has_no_checkpoint_to_download)
{
    char id[64], path[128];
    submit_job(&D, baseline_spec("missing/part*.csv", 1, 1), id, sizeof id);
    json_decref(wait_job_done(&D, id, 30));
    snprintf(path, sizeof path, "/jobs/%s/checkpoint", id);
    json_t *e = get_json(&D, path, 404);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(e, "error"), "code")), "not_found");
    json_decref(e);
}

Test(api, devices_describes_the_cpu_and_says_why_there_is_no_gpu)
{
    json_t *d = get_json(&D, "/devices", 200);
    json_t *cpu = json_object_get(d, "cpu");
    cr_expect_geq(json_integer_value(json_object_get(cpu, "cores")), 1);
    cr_expect(json_is_string(json_object_get(cpu, "model")));
    cr_expect_gt(json_integer_value(json_object_get(cpu, "memory_total")), 0);
    json_t *gpus = json_object_get(d, "gpus");
    cr_assert(json_is_array(gpus));
    if (json_array_size(gpus) == 0) {
        const char *why = json_string_value(json_object_get(d, "gpu_unavailable"));
        cr_expect(why && *why, "no GPU and no reason given");
    }
    json_decref(d);
}

Test(api, traind_devices_prints_what_the_endpoint_returns)
{
    static char out[65536];
    const char *args[] = {"devices", NULL};
    cr_assert_eq(run_traind(args, out, sizeof out), 0, "%s", out);
    json_t *printed = json_loads(out, 0, NULL);
    cr_assert_not_null(printed, "not JSON: %s", out);
    json_t *served = get_json(&D, "/devices", 200);
    cr_expect(json_equal(json_object_get(json_object_get(printed, "cpu"), "cores"),
                         json_object_get(json_object_get(served, "cpu"), "cores")));
    cr_expect(json_equal(json_object_get(printed, "gpus"), json_object_get(served, "gpus")) ||
              json_array_size(json_object_get(printed, "gpus")) > 0);
    /* The same fields, cpu.jobs included (empty: the command trains nothing). */
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(served, "cpu"), key, v)
        cr_expect_not_null(json_object_get(json_object_get(printed, "cpu"), key), "traind devices has cpu.%s", key);
    json_object_foreach(served, key, v)
        cr_expect_not_null(json_object_get(printed, key), "traind devices has %s", key);
    json_decref(printed);
    json_decref(served);
}

Test(api, version_names_traind_and_the_cuda_versions_or_null)
{
    static char out[256];
    const char *args[] = {"--version", NULL};
    cr_assert_eq(run_traind(args, out, sizeof out), 0);
    json_t *v = get_json(&D, "/version", 200);
    const char *ver = json_string_value(json_object_get(v, "version"));
    cr_assert_not_null(ver);
    cr_expect_not_null(strstr(out, ver), "--version says %s, /version %s", out, ver);
    json_t *cuda = json_object_get(v, "cuda");
    cr_expect(json_is_null(cuda) || json_is_string(cuda));
    cr_expect(json_object_get(v, "driver") != NULL);
    json_decref(v);
}

/* cuBLAS is opened by the first GPU backend only: linked, it costs every daemon ~150 MB. */
Test(api, a_daemon_without_a_gpu_never_loads_cublas)
{
    json_t *dv = get_json(&D, "/devices", 200);
    size_t gpus = json_array_size(json_object_get(dv, "gpus"));
    json_decref(dv);
    if (gpus)
        cr_skip_test("this machine has a GPU: a job may have loaded cuBLAS");
    json_t *v = get_json(&D, "/version", 200);
    cr_expect(json_is_null(json_object_get(v, "cublas")), "cuBLAS was loaded without a GPU");
    json_decref(v);
}

Test(api, prometheus_metrics_count_jobs_requests_and_memory)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 1));
    char id[64];
    long_job(id, sizeof id);
    wait_job_iterations(&D, id, 3);
    struct http_reply r;
    cr_assert(http(&D, "GET", "/healthz", NULL, NULL, &r));
    http_reply_free(&r);
    cr_assert(http(&D, "GET", "/metrics", NULL, NULL, &r));
    cr_assert_eq(r.status, 200);
    char ct[128], line[160];
    cr_expect_not_null(strstr(http_header(&r, "Content-Type", ct, sizeof ct), "text/plain"));
    cr_expect_not_null(strstr(r.body, "\ntraind_jobs{state=\"running\"} 1\n"), "%s", r.body);
    cr_expect_not_null(strstr(r.body, "\ntraind_queue_depth 0\n"), "%s", r.body);
    snprintf(line, sizeof line, "\ntraind_job_iteration{job=\"%s\"} ", id);
    cr_expect_not_null(strstr(r.body, line), "%s", r.body);
    snprintf(line, sizeof line, "\ntraind_job_loss{job=\"%s\"} ", id);
    cr_expect_not_null(strstr(r.body, line), "%s", r.body);
    cr_expect_not_null(strstr(r.body, "\ntraind_http_requests_total{code=\"200\"} "), "%s", r.body);
    const char *rss = strstr(r.body, "\ntraind_process_resident_memory_bytes ");
    cr_assert_not_null(rss);
    cr_expect_gt(strtod(rss + 38, NULL), 1e6);
    cr_expect_not_null(strstr(r.body, "# TYPE traind_http_requests_total counter\n"));
    http_reply_free(&r);
    control(id, "cancel", 202);
}

Test(api, unknown_job_routes_are_404_and_wrong_methods_405)
{
    struct http_reply r;
    cr_assert(http(&D, "GET", "/jobs/0123456789abcdef/pause", NULL, NULL, &r));
    cr_expect_eq(r.status, 405);
    char allow[32];
    cr_expect_str_eq(http_header(&r, "Allow", allow, sizeof allow), "POST");
    http_reply_free(&r);
    cr_expect_eq(post("/jobs/0123456789abcdef/resume", NULL, &r), 404);
    http_reply_free(&r);
    cr_expect_eq(post("/devices", NULL, &r), 405);
    http_reply_free(&r);
    cr_assert(http(&D, "GET", "/jobs/0123456789abcdef/nope", NULL, NULL, &r));
    cr_expect_eq(r.status, 404);
    http_reply_free(&r);
}

Test(api, the_checkpoint_download_is_safetensors_with_the_final_parameters)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 2));
    char train[512], id[64], path[128];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 30, 256), id, sizeof id);
    json_t *job = wait_job_done(&D, id, 60);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(job, "checkpoint"), "iteration")), 30);
    snprintf(path, sizeof path, "/jobs/%s/checkpoint", id);
    struct http_reply r;
    cr_assert(http(&D, "GET", path, NULL, NULL, &r));
    cr_assert_eq(r.status, 200, "%s", r.body);
    char hdr[256];
    cr_expect_str_eq(http_header(&r, "Content-Type", hdr, sizeof hdr), "application/octet-stream");
    cr_expect_not_null(strstr(http_header(&r, "Content-Disposition", hdr, sizeof hdr), "attachment; filename="));
    cr_expect_not_null(strstr(hdr, ".safetensors"), "%s", hdr);
    /* http() reads the body as a string; the tensors hold bytes, so take the length from the header. */
    char cl[32];
    size_t len = (size_t)strtoull(http_header(&r, "Content-Length", cl, sizeof cl), NULL, 10);
    const char *data;
    json_t *h = safetensors_header(r.body, len, &data);
    json_t *w = json_object_get(h, "w");
    cr_expect_str_eq(json_string_value(json_object_get(w, "dtype")), "F64");
    cr_expect_eq(json_integer_value(json_array_get(json_object_get(w, "shape"), 0)), 8);
    cr_expect_eq(json_integer_value(json_array_get(json_object_get(w, "shape"), 1)), 1);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(h, "__metadata__"), "iteration")), "30");
    json_int_t off = json_integer_value(json_array_get(json_object_get(w, "data_offsets"), 0));
    json_t *want = json_object_get(json_object_get(job, "parameters"), "w");
    for (size_t i = 0; i < 8; i++) {
        double got;
        memcpy(&got, data + off + 8 * (json_int_t)i, 8);
        cr_expect_eq(got, json_number_value(json_array_get(json_array_get(want, i), 0)), "w[%zu]", i);
    }
    cr_expect_not_null(json_object_get(h, "b"));
    json_decref(h);
    http_reply_free(&r);
    json_decref(job);
}

static void losses(const char *id, double *out, size_t n)
{
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/metrics?limit=100000", id);
    json_t *m = get_json(&D, path, 200);
    json_t *rows = json_object_get(m, "rows");
    cr_assert_eq(json_array_size(rows), n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(json_integer_value(json_array_get(json_array_get(rows, i), 0)), (json_int_t)i);
        out[i] = loss_of(json_array_get(rows, i));
    }
    json_decref(m);
}

Test(api, pause_checkpoints_and_resume_goes_on_with_an_uninterrupted_runs_losses)
{
    enum { N = 20000 };
    cr_assert(gen_dctaxi(&D, "dev", 3000, 2));
    char train[512], id[64], twin[64], path[128];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, N, 64), id, sizeof id);
    wait_job_iterations(&D, id, 5);
    control(id, "pause", 202);
    wait_job_state(&D, id, "paused", 30);
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *job = get_json(&D, path, 200);
    json_int_t at = json_integer_value(json_object_get(json_object_get(job, "progress"), "iteration"));
    cr_assert_lt(at, N, "the job ended before the pause; nothing was tested");
    cr_expect_gt(at, 0, "a pause keeps the work done");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(job, "checkpoint"), "iteration")), at,
                 "the pause checkpointed where it stopped");
    json_decref(job);
    control(id, "resume", 202);
    submit_job(&D, baseline_spec(train, N, 64), twin, sizeof twin);
    json_decref(wait_job_done(&D, id, 120));
    json_decref(wait_job_done(&D, twin, 120));
    static double a[N], b[N];
    losses(id, a, N);
    losses(twin, b, N);
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(a[i], b[i], "iteration %zu: %.17g after pause/resume, %.17g uninterrupted", i, a[i], b[i]);
}

Test(api, a_shuffled_job_resumes_after_a_pause_with_an_uninterrupted_runs_losses)
{
    enum { N = 6000 };
    cr_assert(gen_dctaxi(&D, "dev", 3000, 3));
    char train[512], spec[1200], id[64], twin[64];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s\",\"shuffle\":{\"partitions\":true,\"buffer\":500}},"
             "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.03},\"clip_grad_norm\":0.5,"
             "\"batch_size\":64,\"iterations\":%d,\"seed\":3}", train, N);
    submit_job(&D, spec, id, sizeof id);
    wait_job_iterations(&D, id, 5);
    control(id, "pause", 202);
    wait_job_state(&D, id, "paused", 30);
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *job = get_json(&D, path, 200);
    json_int_t at = json_integer_value(json_object_get(json_object_get(job, "progress"), "iteration"));
    json_decref(job);
    cr_assert_lt(at, N, "the job ended before the pause; nothing was tested");
    control(id, "resume", 202);
    submit_job(&D, spec, twin, sizeof twin);
    json_decref(wait_job_done(&D, id, 120));
    json_decref(wait_job_done(&D, twin, 120));
    static double a[N], b[N];
    losses(id, a, N);
    losses(twin, b, N);
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(a[i], b[i], "iteration %zu (paused at %lld): %.17g resumed, %.17g uninterrupted", i,
                     (long long)at, a[i], b[i]);
}

/* Strict like the spec: a misspelt parameter (?sinse=) is refused, not silently ignored. */
Test(api, an_unknown_query_parameter_is_refused_naming_it)
{
    static const char *const paths[] = {"/jobs?stat=queued", "/healthz?verbose=1",
                                        "/jobs/0123456789abcdef/metrics?sinse=3"};
    struct http_reply r;
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        cr_assert(http(&D, "GET", paths[i], NULL, NULL, &r));
        cr_expect_eq(r.status, 400, "GET %s: %ld %s", paths[i], r.status, r.body);
        cr_expect_str_eq(reply_error_code(&r), "invalid_argument", "GET %s", paths[i]);
        const char *name = strchr(paths[i], '?') + 1;
        const char *param = json_string_value(json_object_get(json_object_get(r.json, "error"), "parameter"));
        cr_expect(param && strncmp(param, name, strcspn(name, "=")) == 0 && param[strcspn(name, "=")] == '\0',
                  "GET %s names the parameter: %s", paths[i], r.body);
        http_reply_free(&r);
    }
    cr_assert(http(&D, "GET", "/jobs?state=queued&limit=5", NULL, NULL, &r));
    cr_expect_eq(r.status, 200, "the parameters a path takes still pass: %s", r.body);
    http_reply_free(&r);
}

Test(api, a_bad_state_filter_lists_every_state_paused_included)
{
    struct http_reply r;
    cr_assert(http(&D, "GET", "/jobs?state=bogus", NULL, NULL, &r));
    cr_expect_eq(r.status, 400);
    const char *msg = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
    static const char *const states[] = {"queued", "running", "paused", "succeeded", "failed", "cancelled"};
    for (size_t i = 0; i < sizeof states / sizeof *states; i++)
        cr_expect(msg && strstr(msg, states[i]), "the message lists %s: %s", states[i], msg);
    http_reply_free(&r);
    json_t *paused = get_json(&D, "/jobs?state=paused", 200);
    cr_expect_eq(json_array_size(json_object_get(paused, "jobs")), 0);
    json_decref(paused);
}

/* application/json and +json types are JSON; a type that merely contains "json" is not. */
Test(api, only_application_json_and_plus_json_types_are_json)
{
    static const struct {
        const char *type;
        long status;
    } cases[] = {
        {"text/json", 415},
        {"application/jsonx", 415},
        {"application/x-json-stream", 415},
        {"application/json", 400},
        {"Application/JSON; charset=utf-8", 400},
        {"application/merge+json", 400},
    };
    struct http_reply r;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* {} is JSON but not a spec: 400 invalid_spec once the type is accepted. */
        cr_assert(http(&D, "POST", "/jobs", cases[i].type, "{}", &r));
        cr_expect_eq(r.status, cases[i].status, "%s: %ld %s", cases[i].type, r.status, r.body);
        http_reply_free(&r);
    }
}
