/* notify.c — sd_notify(3) by hand: one datagram on a unix socket named by $NOTIFY_SOCKET. */
#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int notify_send(const char *state, struct err *e)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof sa.sun_path)
        return err_set(e, ERR_INVALID_ARG, "NOTIFY_SOCKET '%s' is not a socket path", path);
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';   /* the abstract namespace: no trailing NUL counts in the length */
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/'));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_set(e, ERR_IO, "notify: socket: %s", strerror(errno));
    ssize_t sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
    int saved = errno;
    close(fd);
    if (sent != (ssize_t)strlen(state))
        return err_set(e, ERR_IO, "notify: sending to %s: %s", path, strerror(saved));
    return 0;
}

uint64_t notify_watchdog_usec(void)
{
    const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    if (!usec || !*usec)
        return 0;
    /* The watched process is this one, or the launcher that started it (mpirun, whose rank 0
       feeds the watchdog for it: the unit says NotifyAccess=all). */
    long watched = pid && *pid ? strtol(pid, NULL, 10) : 0;
    if (watched && watched != (long)getpid() && watched != (long)getppid())
        return 0;
    char *end;
    unsigned long long v = strtoull(usec, &end, 10);
    return *end ? 0 : (uint64_t)v;
}
