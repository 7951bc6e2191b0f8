/* test_systemd.c — the unit file passes systemd-analyze verify; traind speaks the notify protocol and watches its workers. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
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

TestSuite(systemd, .init = setup, .fini = teardown, .timeout = 120);

static int have_systemd_analyze(void)
{
    return system("command -v systemd-analyze >/dev/null 2>&1") == 0;
}

Test(systemd, the_unit_file_verifies_without_a_word)
{
    if (!have_systemd_analyze())
        cr_skip_test("systemd-analyze is not installed (apt-get install systemd); the unit is not checked");
    const char *unit = getenv("TRAIND_UNIT_FILE"), *bin = getenv("TRAIND_BIN");
    cr_assert(unit && bin, "meson sets TRAIND_UNIT_FILE and TRAIND_BIN");
    /* The unit as installed, but starting the binary just built (verify checks it exists). */
    char copy[400], cmd[1200], out[8192];
    snprintf(copy, sizeof copy, "%s/traind.service", D.dir);
    snprintf(cmd, sizeof cmd, "sed 's|^ExecStart=[^ ]*|ExecStart=%s|' '%s' > '%s'", bin, unit, copy);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "systemd-analyze verify '%s' 2>&1", copy);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    cr_expect_eq(rc, 0, "systemd-analyze verify failed: %s", out);
    cr_expect_eq(n, 0, "systemd-analyze verify said: %s", out);
}

/* A datagram socket under the test's dir, as systemd would pass in NOTIFY_SOCKET. */
static int notify_socket(char *path, size_t cap)
{
    snprintf(path, cap, "%s/notify", D.dir);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    cr_assert_lt(strlen(path), sizeof sa.sun_path);
    strcpy(sa.sun_path, path);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0, "bind %s: %m", path);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* The next datagram that is not a watchdog ping (or any, when watchdog is wanted). */
static void expect_next(int fd, const char *want)
{
    char buf[256];
    for (int i = 0; i < 1000; i++) {
        ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
        cr_assert_gt(n, 0, "no notification (waiting for %s)", want);
        buf[n] = '\0';
        if (strcmp(buf, "WATCHDOG=1") == 0 && strcmp(want, "WATCHDOG=1") != 0)
            continue;
        cr_expect_str_eq(buf, want);
        return;
    }
}

static void respawn_notified(const char *socket_path)
{
    cr_assert_eq(daemon_stop(&D, 20), 0);
    setenv("NOTIFY_SOCKET", socket_path, 1);
    cr_assert(daemon_spawn(&D, NULL));
    unsetenv("NOTIFY_SOCKET");
}

Test(systemd, ready_once_listening_and_stopping_on_sigterm)
{
    char path[400];
    int fd = notify_socket(path, sizeof path);
    respawn_notified(path);
    expect_next(fd, "READY=1");
    json_decref(get_json(&D, "/healthz", 200));   /* READY=1 came after the listener was up */
    cr_assert_eq(daemon_stop(&D, 20), 0);
    expect_next(fd, "STOPPING=1");
    close(fd);
}

Test(systemd, the_watchdog_is_fed_while_workers_are_alive)
{
    char path[400];
    int fd = notify_socket(path, sizeof path);
    setenv("WATCHDOG_USEC", "400000", 1);   /* pings every 200 ms */
    respawn_notified(path);
    unsetenv("WATCHDOG_USEC");
    expect_next(fd, "READY=1");
    double t0 = now_s();
    for (int i = 0; i < 3; i++)
        expect_next(fd, "WATCHDOG=1");
    cr_expect_lt(now_s() - t0, 3.0, "three pings took %.2f s", now_s() - t0);
    close(fd);
}

/* A server that accepts connections and never answers: a download that hangs. */
struct hang_server {
    int fd, port;
    pthread_t thread;
    int conns[16];
    atomic_int n;
    atomic_bool stop;
};

static void *hang_main(void *arg)
{
    struct hang_server *h = arg;
    while (!atomic_load(&h->stop)) {
        struct pollfd p = {.fd = h->fd, .events = POLLIN};
        if (poll(&p, 1, 100) != 1)
            continue;
        int c = accept(h->fd, NULL, NULL);
        if (c >= 0 && atomic_load(&h->n) < 16)
            h->conns[atomic_fetch_add(&h->n, 1)] = c;
        else if (c >= 0)
            close(c);
    }
    return NULL;
}

static void hang_start(struct hang_server *h)
{
    memset(h, 0, sizeof *h);
    h->fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(h->fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    socklen_t len = sizeof sa;
    cr_assert_eq(bind(h->fd, (struct sockaddr *)&sa, len), 0);
    cr_assert_eq(listen(h->fd, 16), 0);
    cr_assert_eq(getsockname(h->fd, (struct sockaddr *)&sa, &len), 0);
    h->port = ntohs(sa.sin_port);
    cr_assert_eq(pthread_create(&h->thread, NULL, hang_main, h), 0);
}

static void hang_stop(struct hang_server *h)
{
    atomic_store(&h->stop, true);
    pthread_join(h->thread, NULL);
    for (int i = 0; i < atomic_load(&h->n); i++)
        close(h->conns[i]);
    close(h->fd);
}

Test(systemd, a_job_whose_worker_stops_showing_life_fails_and_the_worker_comes_back)
{
    struct hang_server h;
    hang_start(&h);
    cr_assert_eq(daemon_stop(&D, 20), 0);
    const char *extra[] = {"--heartbeat-timeout", "1", NULL};
    cr_assert(daemon_spawn(&D, extra));
    char spec[300], id[64];
    snprintf(spec, sizeof spec, "{\"data\":{\"train\":\"http://127.0.0.1:%d/part-00000.csv\"},\"iterations\":5}",
             h.port);
    submit_job(&D, spec, id, sizeof id);
    json_t *job = wait_job_done(&D, id, 30);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "failed");
    json_t *err = json_object_get(job, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "internal");
    cr_expect_str_eq(json_string_value(json_object_get(err, "message")), "worker stopped responding");
    json_decref(job);
    /* The stuck download is abandoned, so the one worker takes the next job. */
    char next[64], missing[400];
    snprintf(missing, sizeof missing, "%s/missing/part*.csv", D.dir); /* below the data root: not found */
    submit_job(&D, baseline_spec(missing, 1, 1), next, sizeof next);
    job = wait_job_done(&D, next, 30);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(job, "error"), "code")),
                     "data_unavailable", "the next job ran on the worker that had been stuck");
    json_decref(job);
    cr_assert_eq(daemon_stop(&D, 20), 0);
    hang_stop(&h);
}
