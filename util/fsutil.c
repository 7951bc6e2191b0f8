/* fsutil.c — creating private directories (mkdir -p, 0700). */
#include "fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int fs_mkdirs(const char *path, struct err *e)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return err_set(e, ERR_INVALID_ARG, "directory path is too long: %.64s...", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p)
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return err_set(e, ERR_IO, "cannot create %s: %s", buf, strerror(errno));
        if (!c)
            break;
        *p = c;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(e, ERR_IO, "%s is not a directory", path);
    return 0;
}
