/* test_notify.c — sd_notify by hand: datagrams reach a path socket and an abstract one; the watchdog interval. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"

/* A datagram socket bound to name ('@' for the abstract namespace), with a receive timeout. */
static int listen_on(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(sa.sun_path, name, n);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '/'));
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, len), 0, "bind %s: %m", name);
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void expect_message(int fd, const char *want)
{
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    cr_assert_gt(n, 0, "nothing arrived");
    buf[n] = '\0';
    cr_expect_str_eq(buf, want);
}

Test(notify, ready_reaches_a_socket_named_by_a_path)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/traind-notify-%d", (int)getpid());
    unlink(path);
    int fd = listen_on(path);
    setenv("NOTIFY_SOCKET", path, 1);
    struct err e = {0};
    cr_assert_eq(notify_send("READY=1", &e), 0, "%s", e.msg);
    expect_message(fd, "READY=1");
    close(fd);
    unlink(path);
}

Test(notify, an_at_sign_means_the_abstract_namespace)
{
    char name[64];
    snprintf(name, sizeof name, "@traind-notify-test-%d", (int)getpid());
    int fd = listen_on(name);
    setenv("NOTIFY_SOCKET", name, 1);
    struct err e = {0};
    cr_assert_eq(notify_send("STOPPING=1", &e), 0, "%s", e.msg);
    expect_message(fd, "STOPPING=1");
    close(fd);
}

Test(notify, without_notify_socket_nothing_is_sent_and_nothing_fails)
{
    unsetenv("NOTIFY_SOCKET");
    struct err e = {0};
    cr_expect_eq(notify_send("READY=1", &e), 0);
}

Test(notify, a_socket_nobody_listens_on_is_an_error)
{
    setenv("NOTIFY_SOCKET", "/tmp/traind-notify-nobody-here", 1);
    struct err e = {0};
    cr_expect_neq(notify_send("READY=1", &e), 0);
    cr_expect_neq(e.msg[0], '\0');
}

Test(notify, watchdog_interval_is_for_this_process_or_its_launcher_only)
{
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    setenv("WATCHDOG_USEC", "30000000", 1);
    setenv("WATCHDOG_PID", pid, 1);
    cr_expect_eq(notify_watchdog_usec(), 30000000u);
    snprintf(pid, sizeof pid, "%d", (int)getppid());   /* mpirun, with rank 0 its child */
    setenv("WATCHDOG_PID", pid, 1);
    cr_expect_eq(notify_watchdog_usec(), 30000000u, "the launcher's watchdog");
    if (getppid() != 1) {
        setenv("WATCHDOG_PID", "1", 1);
        cr_expect_eq(notify_watchdog_usec(), 0u, "another process's watchdog");
    }
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    cr_expect_eq(notify_watchdog_usec(), 0u);
}
