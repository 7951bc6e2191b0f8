/* test_servers.h — starting the node test servers of tests/servers/ from a Criterion test, and asking them things. */
#ifndef TRAIND_TEST_SERVERS_H
#define TRAIND_TEST_SERVERS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct test_server {
    pid_t pid;
    int stdin_fd;        /* closing it stops the server */
    int port;
    char tmp[256];       /* a temp directory of the test's own, removed by test_server_stop */
};

/* Makes s->tmp (call before writing the files the server will serve). */
bool test_server_tmpdir(struct test_server *s);

enum test_server_start { TEST_SERVER_STARTED, TEST_SERVER_NO_NODE, TEST_SERVER_FAILED };

/*
 * Runs `node tests/servers/SCRIPT ARGS...` and waits for its "PORT n" line.
 * TEST_SERVER_NO_NODE (skip) when node or the npm packages are missing;
 * TEST_SERVER_FAILED (fail) when it was there but did not start. why says which.
 */
enum test_server_start test_server_start(struct test_server *s, const char *script, const char *const *args,
                                         char *why, size_t why_size);

/* Starts it or ends the test: skipped without node (failed under CI=true, where it must run), failed when
   the server breaks. */
#define TEST_SERVER_START_OR_SKIP(s, script, args)                                   \
    do {                                                                             \
        char why_[512];                                                              \
        enum test_server_start st_ = test_server_start(s, script, args, why_, sizeof why_); \
        if (st_ == TEST_SERVER_NO_NODE) {                                            \
            test_server_stop(s); /* a skipped test runs no fini: clean up here */   \
            cr_assert(!test_under_ci(), "%s (CI=true: this test must run)", why_);   \
            cr_skip_test("%s", why_);                                                \
        }                                                                            \
        cr_assert_eq(st_, TEST_SERVER_STARTED, "%s", why_);                          \
    } while (0)

/* Stops the server (if started) and removes s->tmp. */
void test_server_stop(struct test_server *s);

/* GET http://127.0.0.1:PORT/path into a string (malloc'ed) with plain libcurl; NULL on failure. */
char *test_server_get(const struct test_server *s, const char *path);

/* Requests the fail server has received for path (its /__count endpoint); -1 on failure. */
long test_server_count(const struct test_server *s, const char *path);
/* The same, counting only requests of one method ("GET", "HEAD"). */
long test_server_count_method(const struct test_server *s, const char *path, const char *method);

/* Writes len bytes to s->tmp/rel (creating directories); false on failure. */
bool test_server_write(const struct test_server *s, const char *rel, const void *data, size_t len);

/* Makes curl go straight to the test servers whatever proxy the environment names. */
void test_no_proxy(void);

/* The environment's AWS credentials become s3.js's own (S3RVER), with no session token. */
void test_s3_credentials(void);

/* Whether CI=true is set: a test that would skip for a missing tool fails instead. */
bool test_under_ci(void);

/* Whether node is on PATH (tests skip without it; CI installs it). */
bool test_have_node(void);

#endif
