/* test_security.c — bearer tokens, body and nesting limits, slow clients, and secrets kept out of answers and logs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

TestSuite(security, .init = setup, .fini = teardown, .timeout = 240);

/* Writes token to dir/token with mode, and returns its path (static buffer). */
static const char *token_file(const char *token, mode_t mode)
{
    static char path[300];
    snprintf(path, sizeof path, "%s/token", D.dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "%s\n", token);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(path, mode), 0);
    return path;
}

/* Restarts traind with extra flags. */
static void respawn(const char *const *extra)
{
    cr_assert_eq(daemon_stop(&D, 20), 0);
    cr_assert(daemon_spawn(&D, extra), "traind did not start with the new flags");
}

static long status_with(const char *path, const char *header)
{
    struct http_reply r;
    cr_assert(http_h(&D, "GET", path, NULL, NULL, header, &r));
    long s = r.status;
    if (s == 401) {
        char www[64];
        cr_expect_not_null(http_header(&r, "WWW-Authenticate", www, sizeof www), "401 without WWW-Authenticate");
        cr_expect_eq(strncmp(www, "Bearer", 6), 0, "%s", www);
        cr_expect_str_eq(reply_error_code(&r), "unauthorized");
    }
    http_reply_free(&r);
    return s;
}

Test(security, without_a_token_file_no_token_is_needed)
{
    cr_expect_eq(status_with("/jobs", NULL), 200);
}

Test(security, with_a_token_file_every_endpoint_but_healthz_needs_the_bearer_token)
{
    const char *extra[] = {"--token-file", token_file("s3cr3t-t0ken", 0600), NULL};
    respawn(extra);
    cr_expect_eq(status_with("/jobs", NULL), 401);
    cr_expect_eq(status_with("/metrics", NULL), 401);
    cr_expect_eq(status_with("/devices", NULL), 401);
    cr_expect_eq(status_with("/jobs", "Authorization: Bearer wrong-token!"), 401);
    cr_expect_eq(status_with("/jobs", "Authorization: Bearer s3cr3t-t0ke"), 401, "a prefix is not the token");
    cr_expect_eq(status_with("/jobs", "Authorization: Basic czNjcjN0LXQwa2Vu"), 401);
    cr_expect_eq(status_with("/jobs", "Authorization: Bearer s3cr3t-t0ken"), 200);
    cr_expect_eq(status_with("/healthz", NULL), 200);
    cr_expect_eq(status_with("/", NULL), 200, "the static dashboard page (it sends the token itself)");
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", baseline_spec("x.csv", 1, 1), &r));
    cr_expect_eq(r.status, 401, "a POST without the token: %s", r.body);
    http_reply_free(&r);
}

Test(security, a_token_file_others_can_read_is_refused_at_start)
{
    static char out[4096];
    char state[300];
    snprintf(state, sizeof state, "%s/state2", D.dir);
    const char *args[] = {"--listen", "127.0.0.1:0", "--state-dir", state, "--token-file",
                          token_file("tok", 0644), NULL};
    cr_expect_eq(run_traind(args, out, sizeof out), 2, "%s", out);
    cr_expect_not_null(strstr(out, "chmod 600"), "the message says how to fix it: %s", out);
}

Test(security, token_file_is_read_from_the_environment_too)
{
    setenv("TRAIND_TOKEN_FILE", token_file("env-token", 0600), 1);
    respawn(NULL);
    unsetenv("TRAIND_TOKEN_FILE");
    cr_expect_eq(status_with("/jobs", NULL), 401);
    cr_expect_eq(status_with("/jobs", "Authorization: Bearer env-token"), 200);
}

Test(security, a_ten_megabyte_body_is_413_and_traind_keeps_serving)
{
    size_t n = 10 * 1024 * 1024;
    char *big = malloc(n + 1);
    cr_assert_not_null(big);
    memset(big, '[', n);
    big[n] = '\0';
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", big, &r));
    cr_expect_eq(r.status, 413);
    cr_expect_str_eq(reply_error_code(&r), "payload_too_large");
    http_reply_free(&r);
    free(big);
    cr_expect_eq(status_with("/healthz", NULL), 200);
}

static long post_status(const char *body, const char **code, struct http_reply *r)
{
    cr_assert(http(&D, "POST", "/jobs", "application/json", body, r));
    *code = reply_error_code(r);
    return r->status;
}

Test(security, ten_thousand_nested_brackets_are_400)
{
    size_t n = 10000;
    char *deep = malloc(n + 1);
    cr_assert_not_null(deep);
    memset(deep, '[', n);
    deep[n] = '\0';
    struct http_reply r;
    const char *code;
    cr_expect_eq(post_status(deep, &code, &r), 400, "%s", r.body);
    cr_expect_str_eq(code, "invalid_json");
    http_reply_free(&r);
    free(deep);
    cr_expect_eq(status_with("/healthz", NULL), 200);
}

Test(security, huge_numbers_and_wrong_types_are_400)
{
    static const char *const bodies[] = {
        "{\"data\":{\"train\":\"x.csv\"},\"iterations\":1e400}",
        "{\"data\":{\"train\":\"x.csv\"},\"iterations\":123456789012345678901234567890}",
        "{\"data\":{\"train\":\"x.csv\"},\"iterations\":\"50\"}",
        "{\"data\":{\"train\":\"x.csv\"},\"iterations\":50,\"batch_size\":-1}",
        "{\"data\":{\"train\":[\"x.csv\"]},\"iterations\":50}",
        "[1,2,3]",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        struct http_reply r;
        const char *code;
        cr_expect_eq(post_status(bodies[i], &code, &r), 400, "%s -> %s", bodies[i], r.body);
        cr_expect(code && (strcmp(code, "invalid_json") == 0 || strcmp(code, "invalid_spec") == 0),
                  "%s -> %s", bodies[i], r.body);
        http_reply_free(&r);
    }
}

Test(security, credentials_never_appear_in_answers_or_logs)
{
    setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEYID0000", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIK7MDENGbPxRfiCYSECRETKEY", 1);
    respawn(NULL);
    struct http_reply r;
    const char *code;
    cr_expect_eq(post_status("{\"data\":{\"train\":\"x.csv\",\"aws_secret_access_key\":"
                             "\"inlineSECRETvalue42\"},\"iterations\":1}", &code, &r), 400);
    cr_expect_null(strstr(r.body, "inlineSECRETvalue42"), "the refusal echoes the secret: %s", r.body);
    http_reply_free(&r);
    static const char *const paths[] = {"/jobs", "/version", "/devices", "/metrics", "/healthz"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        cr_assert(http(&D, "GET", paths[i], NULL, NULL, &r));
        cr_expect_null(strstr(r.body, "SECRETKEY"), "%s shows the secret key", paths[i]);
        cr_expect_null(strstr(r.body, "AKIAEXAMPLE"), "%s shows the key id", paths[i]);
        http_reply_free(&r);
    }
    cr_assert_eq(daemon_stop(&D, 20), 0);
    cr_expect(!daemon_log_contains(&D, "SECRET"), "a secret reached the log");
    cr_expect(!daemon_log_contains(&D, "AKIAEXAMPLE"), "the key id reached the log");
}

static int connect_to(void)
{
    int fd = raw_connect(&D);
    cr_assert_geq(fd, 0, "cannot connect to traind");
    return fd;
}

/*
 * Sends head on a new connection, then byte every 300 ms (never idle long enough for an idle
 * timeout) for up to 8 s; between bytes, between(). The seconds until traind cut it, 0 if never.
 */
static double trickle(const char *head, const char *byte, void (*between)(void))
{
    int fd = connect_to();
    cr_assert_eq(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
    double t0 = now_s(), cut = 0;
    while (now_s() - t0 < 8) {
        ssize_t s = send(fd, byte, 1, MSG_NOSIGNAL);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char buf[64];
        if (s != 1 || (poll(&p, 1, 300) == 1 && recv(fd, buf, sizeof buf, 0) <= 0)) {
            cut = now_s() - t0;
            break;
        }
        if (between)
            between();
    }
    close(fd);
    return cut;
}

static int others_ok;

static void ask_healthz(void)
{
    double q0 = now_s();
    if (status_with("/healthz", NULL) == 200 && now_s() - q0 < 1.0)
        others_ok++;
}

Test(security, a_slowloris_client_neither_blocks_others_nor_outlives_the_timeout)
{
    const char *extra[] = {"--request-timeout", "2", NULL};
    respawn(extra);
    others_ok = 0;
    double cut = trickle("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", "a", ask_healthz);
    cr_expect_gt(cut, 1.5, "cut after %.2f s, before the 2 s timeout", cut);
    cr_expect_lt(cut, 5.0, "the slow connection lived %.2f s (0: never cut)", cut);
    cr_expect_geq(others_ok, 3, "other clients were served quickly %d times", others_ok);
}

Test(security, a_body_sent_a_byte_at_a_time_is_cut_at_the_request_timeout)
{
    const char *extra[] = {"--request-timeout", "2", NULL};
    respawn(extra);
    double cut = trickle("POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         "Content-Length: 1000\r\n\r\n", " ", NULL);
    cr_expect_gt(cut, 1.5, "cut after %.2f s, before the 2 s timeout", cut);
    cr_expect_lt(cut, 5.0, "the slow body lived %.2f s (0: never cut)", cut);
    cr_expect_eq(status_with("/healthz", NULL), 200);
}

/* The headers announce a body that never comes: only an answer given before reading it arrives. */
Test(security, a_request_without_the_token_is_401_before_its_body_is_read)
{
    const char *extra[] = {"--token-file", token_file("body-token", 0600), NULL};
    respawn(extra);
    static const char *const lines[] = {"POST /jobs", "GET /jobs", "DELETE /jobs/0123456789abcdef"};
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        char request[256];
        snprintf(request, sizeof request, "%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Type: application/json\r\nContent-Length: 500000\r\n\r\n", lines[i]);
        long s = raw_status(&D, request, 10);
        cr_expect_eq(s, 401, "%s: status %ld (0: no answer while the body was awaited)", lines[i], s);
    }
}

Test(security, an_unknown_path_is_404_before_its_body_is_read)
{
    long s = raw_status(&D, "POST /no/such/path HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Content-Type: application/json\r\nContent-Length: 500000\r\n\r\n", 10);
    cr_expect_eq(s, 404, "status %ld (0: no answer while the body was awaited)", s);
}

Test(security, a_wrong_method_is_405_before_its_body_is_read)
{
    long s = raw_status(&D, "PUT /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Content-Type: application/json\r\nContent-Length: 500000\r\n\r\n", 10);
    cr_expect_eq(s, 405, "status %ld (0: no answer while the body was awaited)", s);
}

Test(security, endpoints_that_take_no_body_refuse_one_with_413)
{
    static const char *const requests[][2] = {
        {"GET", "/healthz"}, {"GET", "/jobs"}, {"POST", "/jobs/0123456789abcdef/cancel"},
        {"DELETE", "/jobs/0123456789abcdef"},
    };
    for (size_t i = 0; i < sizeof requests / sizeof *requests; i++) {
        struct http_reply r;
        cr_assert(http(&D, requests[i][0], requests[i][1], "application/json", "{\"x\":1}", &r));
        cr_expect_eq(r.status, 413, "%s %s with a body: %ld %s", requests[i][0], requests[i][1], r.status,
                     r.body);
        cr_expect_str_eq(reply_error_code(&r), "payload_too_large");
        http_reply_free(&r);
    }
    /* The body is refused unread: one announced but never sent gets the answer all the same. */
    long s = raw_status(&D, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 500000\r\n\r\n", 10);
    cr_expect_eq(s, 413, "status %ld (0: no answer while the body was awaited)", s);
}
