/* beneath.c — open(2) of a file below a data root that cannot be led out of the root by a symlink or "..". */
#include "beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* O_NONBLOCK: a FIFO swapped in for a partition must not hang the reader in open. */
#define READ_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)

int beneath_walk(int rootfd, const char *rel)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", rel) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int cur = rootfd;
    char *save = NULL;
    char *comp = strtok_r(buf, "/", &save);
    while (comp) {
        char *next = strtok_r(NULL, "/", &save);
        int fd;
        if (strcmp(comp, "..") == 0) {
            fd = -1;
            errno = EXDEV;
        } else {
            /* O_NOFOLLOW on every component: a symlink anywhere fails (ELOOP, or ENOTDIR on the way). */
            fd = openat(cur, comp, next ? O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC : READ_FLAGS | O_NOFOLLOW);
        }
        int saved = errno;
        if (cur != rootfd)
            close(cur);
        if (fd < 0) {
            errno = saved;
            return -1;
        }
        cur = fd;
        comp = next;
    }
    if (cur == rootfd) {
        errno = EISDIR;
        return -1;
    }
    return cur;
}

int beneath_open(const char *root, const char *path)
{
    size_t n = strlen(root);
    while (n > 0 && root[n - 1] == '/')
        n--;
    if (strncmp(path, root, n) != 0 || path[n] != '/') {
        errno = EXDEV;
        return -1;
    }
    const char *rel = path + n + 1;
    int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return -1;
    struct open_how how = {.flags = READ_FLAGS, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS)
        fd = beneath_walk(rootfd, rel);
    int saved = errno;
    close(rootfd);
    errno = saved;
    return fd;
}
