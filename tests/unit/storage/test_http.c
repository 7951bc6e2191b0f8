/* test_http.c — http.h against tests/servers/fail.js: bodies, retries, give-ups, timeouts, messages. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "test_servers.h"

static struct test_server srv;
static struct http_client *client;
static const char body[] = "label,x1,x2\n1.5,2,3\n-4,5.25,6\n";

static void start(void)
{
    cr_assert(test_server_tmpdir(&srv));
    cr_assert(test_server_write(&srv, "data/part-0.csv", body, strlen(body)));
    const char *args[] = {"--root", srv.tmp, NULL};
    TEST_SERVER_START_OR_SKIP(&srv, "fail.js", args);
}

/* Fast backoff so retries cost milliseconds; a 1 s stall limit for the timeout tests. */
static void fast_options(struct http_options *o)
{
    http_options_default(o);
    o->backoff_base_ms = 1;
    o->backoff_cap_ms = 5;
    o->stall_timeout_s = 1;
    o->connect_timeout_ms = 2000;
}

static void make_client(void)
{
    struct http_options o;
    fast_options(&o);
    struct err e = {0};
    cr_assert_eq(http_client_new(&o, &client, &e), ERR_OK, "%s", e.msg);
}

static void teardown(void)
{
    http_client_free(client);
    client = NULL;
    test_server_stop(&srv);
}

static void url_for(char *buf, size_t n, const char *path)
{
    snprintf(buf, n, "http://127.0.0.1:%d%s", srv.port, path);
}

static int get(const char *path, struct http_result *r, struct err *e)
{
    char url[512];
    url_for(url, sizeof url, path);
    struct http_request rq = {.url = url};
    return http_get_mem(client, &rq, r, e);
}

TestSuite(http, .fini = teardown);

Test(http, get_into_memory_is_byte_exact_and_keeps_the_etag)
{
    start();
    make_client();
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(get("/ok/data/part-0.csv", &r, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(r.body_len, strlen(body));
    cr_assert_eq(memcmp(r.body, body, r.body_len), 0);
    cr_assert_eq(r.size, strlen(body));
    cr_assert_eq(r.etag[0], '"', "etag: %s", r.etag);
    http_result_free(&r);
}

Test(http, get_into_a_file_renames_the_whole_object_into_place)
{
    start();
    make_client();
    char url[512], path[512];
    url_for(url, sizeof url, "/ok/data/part-0.csv");
    snprintf(path, sizeof path, "%s/download.csv", srv.tmp);
    struct http_request rq = {.url = url};
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(http_get_file(client, &rq, path, &r, &e), ERR_OK, "%s", e.msg);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    char got[256];
    size_t n = fread(got, 1, sizeof got, f);
    fclose(f);
    cr_assert_eq(n, strlen(body));
    cr_assert_eq(memcmp(got, body, n), 0);
    http_result_free(&r);
}

Test(http, a_500_then_200_is_retried_and_succeeds_with_two_requests)
{
    start();
    make_client();
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(get("/fail-1-500/data/part-0.csv", &r, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(memcmp(r.body, body, strlen(body)), 0);
    cr_assert_eq(test_server_count(&srv, "/fail-1-500/data/part-0.csv"), 2);
    http_result_free(&r);
}

Test(http, a_429_then_503_then_200_is_retried_within_three_attempts)
{
    start();
    make_client();
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(get("/fail-1-429/data/part-0.csv", &r, &e), ERR_OK, "%s", e.msg);
    http_result_free(&r);
    cr_assert_eq(get("/fail-2-503/data/part-0.csv", &r, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(test_server_count(&srv, "/fail-2-503/data/part-0.csv"), 3);
    http_result_free(&r);
}

Test(http, a_persistent_502_gives_up_after_three_attempts)
{
    start();
    make_client();
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(get("/fail-99-502/data/part-0.csv", &r, &e), ERR_DATA_UNAVAILABLE);
    cr_assert_eq(test_server_count(&srv, "/fail-99-502/data/part-0.csv"), 3);
    cr_assert_not_null(strstr(e.msg, "HTTP 502"), "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, "after 3 attempts"), "%s", e.msg);
    http_result_free(&r);
}

Test(http, a_truncated_body_is_detected_and_retried)
{
    start();
    make_client();
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(get("/truncate-1/data/part-0.csv", &r, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(r.body_len, strlen(body));
    cr_assert_eq(test_server_count(&srv, "/truncate-1/data/part-0.csv"), 2);
    http_result_free(&r);
}

Test(http, a_body_truncated_every_time_fails_and_leaves_no_file)
{
    start();
    make_client();
    char url[512], path[512];
    url_for(url, sizeof url, "/truncate-99/data/part-0.csv");
    snprintf(path, sizeof path, "%s/download.csv", srv.tmp);
    struct http_request rq = {.url = url};
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(http_get_file(client, &rq, path, &r, &e), ERR_DATA_UNAVAILABLE);
    cr_assert_eq(test_server_count(&srv, "/truncate-99/data/part-0.csv"), 3);
    struct stat st;
    cr_assert_neq(stat(path, &st), 0, "a partial download was left at %s", path);
    http_result_free(&r);
}

Test(http, a_403_fails_at_once_with_auth_failed)
{
    start();
    make_client();
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(get("/status-403/data/part-0.csv", &r, &e), ERR_AUTH);
    cr_assert_eq(test_server_count(&srv, "/status-403/data/part-0.csv"), 1);
    cr_assert_eq(r.status, 403);
    cr_assert_not_null(strstr(e.msg, "auth_failed"), "%s", e.msg);
    http_result_free(&r);
}

Test(http, a_401_fails_at_once_with_auth_failed)
{
    start();
    make_client();
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(get("/status-401/data/part-0.csv", &r, &e), ERR_AUTH);
    cr_assert_eq(test_server_count(&srv, "/status-401/data/part-0.csv"), 1);
    http_result_free(&r);
}

Test(http, a_404_is_data_unavailable_naming_the_url_without_retrying)
{
    start();
    make_client();
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(get("/status-404/data/part-9.csv", &r, &e), ERR_DATA_UNAVAILABLE);
    cr_assert_eq(test_server_count(&srv, "/status-404/data/part-9.csv"), 1);
    cr_assert_not_null(strstr(e.msg, "/status-404/data/part-9.csv"), "%s", e.msg);
    http_result_free(&r);
}

Test(http, a_stalled_body_times_out_within_the_stall_limit)
{
    start();
    struct http_options o;
    fast_options(&o);
    o.max_attempts = 1;
    struct err e = {0};
    cr_assert_eq(http_client_new(&o, &client, &e), ERR_OK, "%s", e.msg);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct http_result r;
    cr_assert_eq(get("/stall/data/part-0.csv", &r, &e), ERR_DATA_UNAVAILABLE);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    /* curl averages the rate over a window of up to 5 s before the stall clock can start. */
    cr_assert_lt(s, 1.0 + 5.0 + 1.0, "took %.2f s with a 1 s stall limit", s);
    cr_assert_geq(s, 1.0, "gave up after %.2f s, before the stall limit", s);
    http_result_free(&r);
}

Test(http, a_server_that_never_answers_times_out_and_is_retried)
{
    start();
    make_client();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(get("/hang/data/part-0.csv", &r, &e), ERR_DATA_UNAVAILABLE);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    cr_assert_lt(s, 6.0, "took %.2f s for 3 attempts with a 1 s stall limit", s);
    cr_assert_eq(test_server_count(&srv, "/hang/data/part-0.csv"), 3);
    http_result_free(&r);
}

Test(http, a_redirect_is_followed)
{
    start();
    make_client();
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(get("/redirect/data/part-0.csv", &r, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(r.body_len, strlen(body));
    cr_assert_eq(memcmp(r.body, body, strlen(body)), 0);
    http_result_free(&r);
}

Test(http, a_refused_connection_is_retried_then_reported)
{
    make_client();
    /* A port nothing listens on: bind one, learn its number, close it. */
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:1/x.csv");
    struct http_request rq = {.url = url};
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(http_get_mem(client, &rq, &r, &e), ERR_DATA_UNAVAILABLE);
    cr_assert_eq(http_client_attempts(client), 3);
    http_result_free(&r);
}

Test(http, messages_never_carry_userinfo_or_query)
{
    start();
    make_client();
    char url[512];
    snprintf(url, sizeof url, "http://alice:s3cret@127.0.0.1:%d/status-404/x.csv?X-Amz-Signature=abcdef", srv.port);
    struct http_request rq = {.url = url};
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(http_get_mem(client, &rq, &r, &e), ERR_DATA_UNAVAILABLE);
    cr_assert_null(strstr(e.msg, "s3cret"), "%s", e.msg);
    cr_assert_null(strstr(e.msg, "abcdef"), "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, "/status-404/x.csv"), "%s", e.msg);
    http_result_free(&r);
}

Test(http, only_http_and_https_are_fetched)
{
    make_client();
    struct http_request rq = {.url = "file:///etc/passwd"};
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(http_get_mem(client, &rq, &r, &e), ERR_INVALID_ARG);
    cr_assert_eq(http_client_attempts(client), 0);
    http_result_free(&r);
}

Test(http, a_raised_cancel_flag_stops_the_transfer)
{
    start();
    atomic_bool cancel = true;
    struct http_options o;
    fast_options(&o);
    o.cancel = &cancel;
    struct err e = {0};
    cr_assert_eq(http_client_new(&o, &client, &e), ERR_OK, "%s", e.msg);
    struct http_result r;
    cr_assert_eq(get("/stall/data/part-0.csv", &r, &e), ERR_CANCELLED, "%s", e.msg);
    http_result_free(&r);
}

Test(http, a_truncated_download_into_a_file_is_rewound_and_retried)
{
    start();
    make_client();
    char url[512], path[512];
    url_for(url, sizeof url, "/truncate-1/data/part-0.csv");
    snprintf(path, sizeof path, "%s/download.csv", srv.tmp);
    struct http_request rq = {.url = url};
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(http_get_file(client, &rq, path, &r, &e), ERR_OK, "%s", e.msg);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    char got[256];
    size_t n = fread(got, 1, sizeof got, f);
    fclose(f);
    /* The first attempt's half body must not stay in front of the second's. */
    cr_assert_eq(n, strlen(body));
    cr_assert_eq(memcmp(got, body, n), 0);
    cr_assert_eq(test_server_count(&srv, "/truncate-1/data/part-0.csv"), 2);
    http_result_free(&r);
}

Test(http, head_gives_size_and_etag_without_a_body)
{
    start();
    make_client();
    char url[512];
    url_for(url, sizeof url, "/ok/data/part-0.csv");
    struct http_request rq = {.url = url};
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(http_head(client, &rq, &r, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(r.size, strlen(body));
    cr_assert_eq(r.body_len, 0);
    cr_assert_eq(r.etag[0], '"', "etag: %s", r.etag);
    cr_assert_eq(test_server_count_method(&srv, "/ok/data/part-0.csv", "HEAD"), 1);
    http_result_free(&r);
}

/* Messages name URLs through http_url_redact: a password may itself hold an '@'. */
Test(http_redact, a_password_holding_an_at_sign_does_not_show_in_messages)
{
    char out[256];
    http_url_redact("https://user:p@ss@host:8443/d/x.csv?X-Amz-Signature=s#f", out, sizeof out);
    cr_assert_str_eq(out, "https://host:8443/d/x.csv");
}
