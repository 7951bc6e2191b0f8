/* test_objstore.c — the real traind training from a real S3-compatible server (s3rver on loopback). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"
#include "test_servers.h"
#include "torch_ref.h"

#define N_PARTS 4
#define PARQUET_FIXTURE FIXTURES_DIR "/parquet/groups.parquet"
/* The daemon's secret key: a string no response or log line may contain. */
#define SECRET "traind-it-secret-5d1e8c"

static struct daemon_proc D;
static struct test_server S3;

/*
 * The DC-taxi data of the file:// baseline test (same generator, rows and partitions),
 * uploaded to bucket "taxi" under csv/dev/, plus an object the glob must not match, and
 * groups.parquet (9 columns in two row groups, by DuckDB) under pq/, also copied below the
 * data root.
 * The daemon signs with these credentials; s3rver accepts any. The server starts
 * first: the daemon is told its endpoint with --s3-endpoint, the only one a spec may name.
 */
static void setup(void)
{
    test_no_proxy();
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);   /* s3rver checks the key id only */
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_ENDPOINT_URL"); /* the spec names the endpoint */
    unsetenv("TRAIND_S3_ENDPOINT");
    memset(&D, 0, sizeof D);
    snprintf(D.dir, sizeof D.dir, "/tmp/traind-it-XXXXXX");
    cr_assert_not_null(mkdtemp(D.dir));
    cr_assert(gen_dctaxi(&D, "dev", 200000, N_PARTS));
    cr_assert(test_server_tmpdir(&S3));
    static char dir[512], puts_[N_PARTS + 2][1024];
    snprintf(dir, sizeof dir, "%s/s3", S3.tmp);
    const char *args[8 + 2 * (N_PARTS + 2)] = {"--dir", dir, "--bucket", "taxi"};
    size_t n = 4;
    for (int p = 0; p < N_PARTS; p++) {
        snprintf(puts_[p], sizeof puts_[p], "taxi/csv/dev/part-%05d.csv=%s/dev/part-%05d.csv", p,
                 D.dir, p);
        args[n++] = "--put";
        args[n++] = puts_[p];
    }
    snprintf(puts_[N_PARTS], sizeof puts_[N_PARTS], "taxi/csv/dev/README.txt=%s/dev/part-00000.csv",
             D.dir);
    args[n++] = "--put";
    args[n++] = puts_[N_PARTS];
    snprintf(puts_[N_PARTS + 1], sizeof puts_[N_PARTS + 1], "taxi/pq/groups.parquet=%s", PARQUET_FIXTURE);
    args[n++] = "--put";
    args[n++] = puts_[N_PARTS + 1];
    args[n] = NULL;
    char cp[1024];
    snprintf(cp, sizeof cp, "cp '%s' '%s/groups.parquet'", PARQUET_FIXTURE, D.dir);
    cr_assert_eq(system(cp), 0);
    TEST_SERVER_START_OR_SKIP(&S3, "s3.js", args);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", S3.port);
    const char *flags[] = {"--s3-endpoint", endpoint, NULL};
    cr_assert(daemon_spawn(&D, flags), "traind did not start");
}

static void teardown(void)
{
    daemon_stop_clean(&D);
    test_server_stop(&S3);
}

TestSuite(integration_s3, .init = setup, .fini = teardown, .timeout = 240);

/* The baseline spec reading train from the endpoint at host (the s3rver's port). */
static void spec_at(char *spec, size_t cap, const char *train, const char *host, const char *extra_data)
{
    snprintf(spec, cap,
             "{\"name\":\"dc-taxi-s3\",\"data\":{\"train\":\"%s\",\"endpoint\":\"http://%s:%d\","
             "\"region\":\"us-east-1\"%s},"
             "\"model\":{\"type\":\"linear\"},\"loss\":\"mse\",\"optimizer\":{\"type\":\"sgd\",\"lr\":0.03},"
             "\"clip_grad_norm\":0.5,\"batch_size\":65536,\"iterations\":50,\"dtype\":\"float64\",\"seed\":0}",
             train, host, S3.port, extra_data);
}

static const char *submit(const char *train, const char *extra_data)
{
    static char id[64];
    char spec[2048];
    spec_at(spec, sizeof spec, train, "127.0.0.1", extra_data);
    submit_job(&D, spec, id, sizeof id);
    return id;
}

/* POST /jobs with spec: the status, and the error's field (or "") into field. */
static long post_spec(const char *spec, char *field, size_t cap)
{
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", spec, &r));
    json_t *body = json_loads(r.body, 0, NULL);
    const char *f = json_string_value(json_object_get(json_object_get(body, "error"), "field"));
    snprintf(field, cap, "%s", f ? f : "");
    long status = r.status;
    json_decref(body);
    http_reply_free(&r);
    return status;
}

/* The same server under another name (localhost, not the 127.0.0.1 the operator listed) stands for any
   host a spec might name: the daemon's credentials must not be sent there. */
Test(integration_s3, a_spec_naming_an_endpoint_the_daemon_was_not_given_is_refused_on_data_endpoint)
{
    char spec[2048], field[64];
    spec_at(spec, sizeof spec, "s3://taxi/csv/dev/part*.csv", "localhost", "");
    cr_expect_eq(post_spec(spec, field, sizeof field), 400);
    cr_expect_str_eq(field, "data.endpoint");
    json_t *jobs = get_json(&D, "/jobs", 200);
    cr_expect_eq(json_array_size(json_object_get(jobs, "jobs")), 0, "the refused spec became a job");
    json_decref(jobs);
}

Test(integration_s3, a_spec_naming_the_endpoint_given_with_s3_endpoint_is_accepted)
{
    char spec[2048], field[64];
    spec_at(spec, sizeof spec, "s3://taxi/csv/dev/part*.csv", "127.0.0.1", "");
    cr_expect_eq(post_spec(spec, field, sizeof field), 201, "refused on %s", field);
}

Test(integration_s3, baseline_job_from_s3_trains_to_pytorchs_losses)
{
    const char *id = submit("s3://taxi/csv/dev/part*.csv", "");
    json_t *job = wait_job_done(&D, id, 180);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "error: %s",
                     json_string_value(json_object_get(json_object_get(job, "error"), "message")));
    json_decref(job);
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s/metrics", id);
    json_t *m = get_json(&D, path, 200);
    json_t *rows = json_object_get(m, "rows");
    cr_assert_eq(json_array_size(rows), 50);
    /* The bytes from S3 are the file:// test's bytes: PyTorch's losses, to float rounding. */
    expect_torch_losses(rows, "loss");
    json_decref(m);
}

Test(integration_s3, missing_bucket_fails_the_job_as_data_unavailable)
{
    json_t *job = wait_job_done(&D, submit("s3://no-such-bucket/csv/dev/part*.csv", ""), 180);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "failed");
    json_t *err = json_object_get(job, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "data_unavailable", "%s",
                     json_string_value(json_object_get(err, "message")));
    json_decref(job);
    json_decref(get_json(&D, "/healthz", 200)); /* and the daemon keeps serving */
}

/*
 * After a signed S3 job, with the daemon logging at debug: neither its responses nor its log
 * show the secret key or a request's signature (which would let anyone replay the request).
 */
Test(integration_s3, credentials_never_appear_in_responses_or_the_log)
{
    const char *id = submit("s3://taxi/csv/dev/part-0000[01].csv", "");
    json_t *job = wait_job_done(&D, id, 180);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
    json_decref(job);
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s", id);
    const char *const paths[] = {path, "/jobs", "/metrics", "/version", "/devices"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        struct http_reply r;
        cr_assert(http(&D, "GET", paths[i], NULL, NULL, &r));
        cr_expect_eq(r.status, 200, "GET %s: %ld", paths[i], r.status);
        cr_expect_null(strstr(r.body, SECRET), "GET %s shows the secret key: %s", paths[i], r.body);
        http_reply_free(&r);
    }
    cr_expect(!daemon_log_contains(&D, SECRET), "the log shows the secret key");
    cr_expect(!daemon_log_contains(&D, "Signature="), "the log shows a request signature");
    cr_expect(!daemon_log_contains(&D, "X-Amz-Security-Token"), "the log shows a session token header");
}

Test(integration_s3, a_listing_past_list_max_keys_fails_the_job_as_invalid_data_naming_the_url)
{
    cr_assert_eq(daemon_stop(&D, 20), 0);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", S3.port);
    const char *flags[] = {"--s3-endpoint", endpoint, "--list-max-keys", "2", NULL};
    cr_assert(daemon_spawn(&D, flags), "traind did not start with --list-max-keys");
    const char *id = submit("s3://taxi/csv/dev/part*.csv", "");
    char *msg = job_failure(&D, id, "invalid_data", 60);
    cr_expect_not_null(strstr(msg, "s3://taxi/csv/dev/part"), "%s", msg);
    cr_expect_not_null(strstr(msg, "more than 2 objects (--list-max-keys)"), "%s", msg);
    free(msg);
}

/* A job over groups.parquet reading y and x0 (2 of its 9 columns) from train; its GET /jobs/{id}. */
static json_t *two_column_job(const char *train, const char *endpoint_data)
{
    char spec[2048], id[64];
    snprintf(spec, sizeof spec,
             "{\"name\":\"two-of-nine\",\"data\":{\"train\":\"%s\",\"label\":\"y\",\"features\":[\"x0\"]%s},"
             "\"model\":{\"type\":\"linear\"},\"loss\":\"mse\",\"optimizer\":{\"type\":\"sgd\",\"lr\":0.1},"
             "\"batch_size\":500,\"iterations\":10,\"dtype\":\"float64\",\"seed\":0}",
             train, endpoint_data);
    submit_job(&D, spec, id, sizeof id);
    json_t *job = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "error: %s",
                     json_string_value(json_object_get(json_object_get(job, "error"), "message")));
    return job;
}

static json_t *losses_of(json_t *job)
{
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s/metrics", json_string_value(json_object_get(job, "id")));
    return get_json(&D, path, 200);
}

Test(integration_s3, two_of_nine_parquet_columns_fetch_under_35_percent_and_train_as_from_a_local_file)
{
    char data[128], local[600];
    snprintf(data, sizeof data, ",\"endpoint\":\"http://127.0.0.1:%d\",\"region\":\"us-east-1\"", S3.port);
    snprintf(local, sizeof local, "file://%s/groups.parquet", D.dir);
    json_t *remote = two_column_job("s3://taxi/pq/groups.parquet", data), *file = two_column_job(local, "");
    json_t *d = json_object_get(remote, "data");
    cr_assert(json_is_object(d), "GET /jobs/{id} has no data object");
    json_int_t fetched = json_integer_value(json_object_get(d, "bytes_fetched"));
    json_int_t total = json_integer_value(json_object_get(d, "bytes_total"));
    FILE *fp = fopen(PARQUET_FIXTURE, "rb");
    cr_assert_not_null(fp);
    cr_assert_eq(fseek(fp, 0, SEEK_END), 0);
    long size = ftell(fp);
    fclose(fp);
    cr_assert_eq(total, size);
    cr_assert(fetched > 0 && fetched * 100 < total * 35, "%lld of %lld bytes fetched for 2 of 9 columns",
              (long long)fetched, (long long)total);
    json_t *a = losses_of(remote), *b = losses_of(file);
    json_t *ra = json_object_get(a, "rows"), *rb = json_object_get(b, "rows");
    cr_assert_eq(json_array_size(ra), 10);
    cr_assert_eq(json_array_size(rb), 10);
    for (size_t i = 0; i < 10; i++) {
        double la = json_number_value(json_array_get(json_array_get(ra, i), 2)); /* the loss column */
        double lb = json_number_value(json_array_get(json_array_get(rb, i), 2));
        cr_assert(memcmp(&la, &lb, sizeof la) == 0, "iteration %zu: %.17g from s3, %.17g from the file", i, la, lb);
    }
    json_decref(a);
    json_decref(b);
    json_decref(remote);
    json_decref(file);
}
