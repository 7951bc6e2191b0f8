/* test_limits.c — what the daemon caps on hostile input: metrics pages, the memory of unread
 * responses, model sizes, remote listings, and a data root over the state directory. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
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

TestSuite(limits, .init = setup, .fini = teardown, .timeout = 240);

static void respawn(const char *const *extra)
{
    cr_assert_eq(daemon_stop(&D, 20), 0);
    cr_assert(daemon_spawn(&D, extra), "traind did not start with the new flags");
}

/* A finished baseline job of n iterations (batch 64 over 3000 rows); its id in id. */
static void finished_job(int n, char *id, size_t cap)
{
    cr_assert(gen_dctaxi(&D, "dev", 3000, 2));
    char train[512];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, n, 64), id, cap);
    json_t *job = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
    json_decref(job);
}

Test(limits, a_metrics_limit_above_the_cap_is_400_naming_limit_and_the_cap)
{
    char id[64], path[160];
    finished_job(3, id, sizeof id);
    snprintf(path, sizeof path, "/jobs/%s/metrics?limit=100001", id);
    struct http_reply r;
    cr_assert(http(&D, "GET", path, NULL, NULL, &r));
    cr_expect_eq(r.status, 400, "%ld %s", r.status, r.body);
    cr_expect_str_eq(reply_error_code(&r), "invalid_argument");
    cr_expect_not_null(strstr(r.body, "'limit'"), "%s", r.body);
    cr_expect_not_null(strstr(r.body, "100000"), "%s", r.body);
    http_reply_free(&r);
    snprintf(path, sizeof path, "/jobs/%s/metrics?limit=100000", id);
    json_decref(get_json(&D, path, 200));
}

Test(limits, a_page_longer_than_the_stream_buffer_is_streamed_and_equals_the_same_rows_paged)
{
    enum { N = 5000, PAGE = 200 };
    char id[64], path[160];
    finished_job(N, id, sizeof id);
    snprintf(path, sizeof path, "/jobs/%s/metrics?since=7&limit=100000", id);
    struct http_reply r;
    cr_assert(http(&D, "GET", path, NULL, NULL, &r));
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    char te[32];
    cr_expect_not_null(http_header(&r, "Transfer-Encoding", te, sizeof te), "a long page is sent whole");
    cr_assert_not_null(r.json, "the streamed page is not JSON");
    json_t *rows = json_object_get(r.json, "rows");
    cr_assert_eq(json_array_size(rows), N - 7);
    cr_expect_eq(json_integer_value(json_object_get(r.json, "next_since")), N);
    /* The same rows, a short page at a time (each rendered whole). */
    json_t *paged = json_array();
    json_int_t since = 7;
    while (since < N) {
        snprintf(path, sizeof path, "/jobs/%s/metrics?since=%lld&limit=%d", id, (long long)since, PAGE);
        json_t *m = get_json(&D, path, 200);
        cr_assert(json_equal(json_object_get(m, "columns"), json_object_get(r.json, "columns")));
        json_array_extend(paged, json_object_get(m, "rows"));
        json_int_t next = json_integer_value(json_object_get(m, "next_since"));
        cr_assert_gt(next, since);
        since = next;
        json_decref(m);
    }
    cr_expect(json_equal(rows, paged), "the streamed rows differ from the paged ones");
    json_decref(paged);
    http_reply_free(&r);
}

/* Everything fd receives until the peer closes it or timeout_s pass, as a string (free it). */
static char *read_all(int fd, double timeout_s)
{
    size_t cap = 65536, got = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    for (double t0 = now_s(); got < cap - 1 && now_s() - t0 < timeout_s;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) != 1)
            continue;
        ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    return buf;
}

Test(limits, head_of_a_streamed_page_sends_the_headers_and_no_body)
{
    char id[64], req[256];
    finished_job(1000, id, sizeof id);
    int fd = raw_connect(&D);
    cr_assert_geq(fd, 0);
    int n = snprintf(req, sizeof req, "HEAD /jobs/%s/metrics?limit=100000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", id);
    cr_assert_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    char *got = read_all(fd, 5);
    close(fd);
    cr_expect_eq(strncmp(got, "HTTP/1.1 200 ", 13), 0, "%s", got);
    cr_expect_not_null(strstr(got, "Content-Type: application/json\r\n"), "%s", got);
    char *end = strstr(got, "\r\n\r\n");
    cr_assert_not_null(end, "the headers never ended: %s", got);
    cr_expect_str_eq(end + 4, "", "bytes after the headers of a HEAD answer (a stray last chunk?)");
    free(got);
}

/* A client that asks for a page and reads none of it, with a small receive window. */
static int unread_request(const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    int small = 4096;
    cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)D.port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    cr_assert_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    return fd;
}

Test(limits, responses_past_response_memory_max_get_503_with_retry_after_until_readers_go)
{
    /*
     * A streamed page holds 96 KiB: room for two, not three. Its rows (about 140 bytes each)
     * must be more than a socket's send buffer takes (tcp_wmem's 4 MiB at most), or the whole
     * page leaves the daemon at once and the stream holds nothing.
     */
    const char *extra[] = {"--response-memory-max", "250000", NULL};
    respawn(extra);
    enum { N = 60000 };
    char id[64], path[160];
    finished_job(N, id, sizeof id);
    snprintf(path, sizeof path, "/jobs/%s/metrics?limit=100000", id);
    int a = unread_request(path), b = unread_request(path);
    sleep_ms(300);
    struct http_reply r;
    cr_assert(http(&D, "GET", path, NULL, NULL, &r));
    cr_expect_eq(r.status, 503, "%ld", r.status);
    cr_expect_str_eq(reply_error_code(&r), "unavailable");
    char ra[16];
    cr_expect_not_null(http_header(&r, "Retry-After", ra, sizeof ra), "503 without Retry-After");
    cr_expect_not_null(strstr(r.body, "--response-memory-max"), "%s", r.body);
    http_reply_free(&r);
    close(a);
    close(b);
    double t0 = now_s();
    long status = 0;
    while (status != 200 && now_s() - t0 < 10) {
        sleep_ms(100);
        cr_assert(http(&D, "GET", path, NULL, NULL, &r));
        status = r.status;
        if (status == 200)
            cr_expect_eq(json_array_size(json_object_get(r.json, "rows")), N);
        http_reply_free(&r);
    }
    cr_expect_eq(status, 200, "the memory of the closed connections was not given back");
}

static struct http_reply post_mlp(const char *hidden)
{
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\"},\"model\":{\"type\":\"mlp\",\"hidden\":%s},"
             "\"iterations\":1,\"dtype\":\"float64\"}", D.dir, hidden);
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", spec, &r));
    return r;
}

Test(limits, a_model_over_model_max_bytes_is_400_naming_the_field_and_the_size)
{
    const char *extra[] = {"--model-max-bytes", "1M", NULL};
    respawn(extra);
    /* Linear(1, 1024), Linear(1024, 1024), Linear(1024, 1): 2048 + 1049600 + 1025 float64s. */
    struct http_reply r = post_mlp("[1024, 1024]");
    cr_expect_eq(r.status, 400, "%ld %s", r.status, r.body);
    cr_expect_str_eq(reply_error_code(&r), "invalid_spec");
    json_t *err = json_object_get(r.json, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "field")), "model.hidden");
    cr_expect_not_null(strstr(r.body, "8421384 bytes"), "%s", r.body);
    cr_expect_not_null(strstr(r.body, "1048576"), "%s", r.body);
    http_reply_free(&r);
    r = post_mlp("[16, 16]");
    cr_expect_eq(r.status, 201, "a small model is taken: %ld %s", r.status, r.body);
    http_reply_free(&r);
}

Test(limits, by_default_a_model_of_terabytes_is_refused_at_submit)
{
    struct http_reply r = post_mlp("[65536, 65536, 65536]");
    cr_expect_eq(r.status, 400, "%ld %s", r.status, r.body);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(r.json, "error"), "field")), "model.hidden");
    http_reply_free(&r);
}

Test(limits, traind_refuses_to_start_with_its_state_dir_inside_a_data_root)
{
    static char out[4096];
    char state[300];
    snprintf(state, sizeof state, "%s/state", D.dir);
    const char *args[] = {"--listen", "127.0.0.1:0", "--data-root", D.dir, "--state-dir", state, NULL};
    cr_expect_eq(run_traind(args, out, sizeof out), 2, "%s", out);
    cr_expect_not_null(strstr(out, "holds the state directory"), "%s", out);
    cr_expect_not_null(strstr(out, "--state-dir"), "the message says how to fix it: %s", out);
}
