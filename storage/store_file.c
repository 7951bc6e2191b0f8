/* store_file.c — the local file system as an object store: glob listing and reads confined to data roots. */
#include "store.h"

#include "beneath.h"
#include "hugemem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool store_path_below(const char *p, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return true;
    while (n > 1 && root[n - 1] == '/')
        n--;
    return strncmp(p, root, n) == 0 && (p[n] == '/' || p[n] == '\0');
}

/* Roots are resolved at each check, so `..` and symlinks in a root are judged by where they lead. The root
   that holds resolved goes to root_out (when not NULL); without roots, every path is allowed and it is "". */
static bool allowed(const struct store_access *acc, const char *resolved, char *root_out)
{
    if (root_out)
        root_out[0] = '\0';
    if (!acc || !acc->data_roots)
        return true;
    for (size_t i = 0; i < acc->n_data_roots; i++) {
        char root[PATH_MAX];
        if (acc->data_roots[i] && realpath(acc->data_roots[i], root) && store_path_below(resolved, root)) {
            if (root_out)
                memcpy(root_out, root, strlen(root) + 1);
            return true;
        }
    }
    return false;
}

/*
 * A location that does not resolve is judged by its nearest ancestor that does: below a root it is
 * missing, elsewhere it gets the error of a location outside the roots, so that a job's error never
 * tells whether something exists outside them.
 */
static int missing(const struct store_access *acc, const char *location, struct err *e)
{
    char up[PATH_MAX], resolved[PATH_MAX];
    snprintf(up, sizeof up, "%s", location);
    for (;;) {
        char *slash = strrchr(up, '/');
        if (!slash)
            snprintf(up, sizeof up, ".");
        else if (slash == up)
            up[1] = '\0';
        else
            *slash = '\0';
        if (realpath(up, resolved))
            break;
        if (strcmp(up, ".") == 0 || strcmp(up, "/") == 0)
            return err_set(e, ERR_AUTH, "path outside --data-root");
    }
    if (!allowed(acc, resolved, NULL))
        return err_set(e, ERR_AUTH, "path outside --data-root");
    return err_set(e, ERR_DATA_UNAVAILABLE, "no such directory");
}

static int cmp_name(const void *a, const void *b)
{
    const struct store_object *x = a, *y = b;
    return strcmp(x->name, y->name);
}

static int push(struct store_listing *l, size_t *cap, const char *name, const char *path, const char *root,
                uint64_t size, struct err *e)
{
    if (l->n == *cap) {
        size_t ncap = *cap ? 2 * *cap : 16;
        struct store_object *v = realloc(l->v, ncap * sizeof *v);
        if (!v)
            return err_set(e, ERR_NOMEM, "out of memory listing files");
        l->v = v;
        *cap = ncap;
    }
    struct store_object *o = &l->v[l->n];
    o->name = strdup(name);
    o->path = strdup(path);
    o->size = size;
    o->etag = NULL;
    o->root = root[0] ? strdup(root) : NULL;
    o->exact_size = true;
    if (!o->name || !o->path || (root[0] && !o->root)) {
        free(o->name);
        free(o->path);
        free(o->root);
        return err_set(e, ERR_NOMEM, "out of memory listing files");
    }
    l->n++;
    return ERR_OK;
}

/* Adds dir/name when it resolves to a regular file; a file outside the roots fails the whole listing. */
static int consider(const struct store_access *acc, const char *dir, const char *name,
                    struct store_listing *l, size_t *cap, struct err *e)
{
    char joined[PATH_MAX], resolved[PATH_MAX], root[PATH_MAX];
    int n = snprintf(joined, sizeof joined, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof joined)
        return err_set(e, ERR_INVALID_ARG, "path too long: %s/%s", dir, name);
    if (!realpath(joined, resolved))
        return ERR_OK; /* dangling link or raced away: not a file we can read */
    struct stat st;
    if (stat(resolved, &st) != 0 || !S_ISREG(st.st_mode))
        return ERR_OK;
    if (!allowed(acc, resolved, root))
        return err_set(e, ERR_AUTH, "%s: path outside --data-root", joined);
    return push(l, cap, name, resolved, root, (uint64_t)st.st_size, e);
}

int store_file_list(const struct store_url *u, const struct store_access *acc, struct store_listing *out,
                    struct err *e)
{
    memset(out, 0, sizeof *out);
    if (acc && acc->data_roots && acc->n_data_roots == 0)
        return err_set(e, ERR_AUTH, "no --data-root was given, so traind reads no local files");
    char dir[PATH_MAX];
    if (!realpath(u->location, dir)) {
        if (errno == ENOENT || errno == ENOTDIR)
            return missing(acc, u->location, e);
        return err_set(e, ERR_IO, "%s: %s", u->location, strerror(errno));
    }
    if (!allowed(acc, dir, NULL))
        return err_set(e, ERR_AUTH, "path outside --data-root");
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOTDIR || errno == ENOENT)
            return err_set(e, ERR_DATA_UNAVAILABLE, "no such directory");
        return err_set(e, ERR_IO, "%s: %s", u->location, strerror(errno));
    }
    size_t cap = 0;
    int rc = ERR_OK;
    struct dirent *ent;
    errno = 0;
    while (rc == ERR_OK && (ent = readdir(d)) != NULL) {
        /* FNM_PERIOD: `*` does not pick up hidden files such as kaen's .meta. */
        if (fnmatch(u->pattern, ent->d_name, FNM_PERIOD) == 0)
            rc = consider(acc, dir, ent->d_name, out, &cap, e);
        errno = 0;
    }
    if (rc == ERR_OK && errno != 0)
        rc = err_set(e, ERR_IO, "%s: %s", u->location, strerror(errno));
    closedir(d);
    if (rc == ERR_OK && out->n == 0)
        rc = err_set(e, ERR_DATA_UNAVAILABLE, "no file matches");
    if (rc != ERR_OK) {
        store_listing_free(out);
        return rc;
    }
    qsort(out->v, out->n, sizeof *out->v, cmp_name);
    return ERR_OK;
}

/* Reads len bytes of fd into a buffer of our own; ERR_INVALID_DATA when the file is not len bytes long
   from start to end of the read (it shrank or grew meanwhile). */
static int read_exact(int fd, const char *name, size_t len, struct store_blob *b, struct err *e)
{
    char *buf = hugemem_alloc(len);
    if (!buf)
        return err_set(e, ERR_NOMEM, "%s: out of memory for %zu bytes", name, len);
    size_t got = 0;
    ssize_t r = 1;
    while (got < len && (r = pread(fd, buf + got, len - got, (off_t)got)) != 0) {
        if (r < 0 && errno != EINTR)
            break;
        got += r > 0 ? (size_t)r : 0;
    }
    char extra;
    if (r >= 0 && got == len)
        r = pread(fd, &extra, 1, (off_t)len); /* 0 at the end, as it should be */
    if (r != 0 || got < len) {
        int rc = r < 0 ? err_set(e, ERR_IO, "%s: %s", name, strerror(errno))
                       : err_set(e, ERR_INVALID_DATA, "%s: changed size while it was read (%zu bytes expected)",
                                 name, len);
        free(buf);
        return rc;
    }
    b->data = buf;
    b->len = len;
    b->own = buf;
    return ERR_OK;
}

int store_file_open(const struct store_object *o, int *fd_out, struct err *e)
{
    int fd = o->root ? beneath_open(o->root, o->path) : open(o->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        /* Gone, or now reached through a link out of the root: one message, which tells nothing more. */
        if (o->root && (errno == ENOENT || errno == ENOTDIR || errno == EXDEV || errno == ELOOP))
            return err_set(e, ERR_DATA_UNAVAILABLE, "%s: no longer a file below --data-root", o->path);
        int code = errno == ENOENT ? ERR_DATA_UNAVAILABLE : errno == EACCES ? ERR_AUTH : ERR_IO;
        return err_set(e, code, "%s: %s", o->path, strerror(errno));
    }
    struct stat st;
    int rc = ERR_OK;
    if (fstat(fd, &st) != 0)
        rc = err_set(e, ERR_IO, "%s: %s", o->path, strerror(errno));
    else if (o->exact_size && S_ISREG(st.st_mode) && (uint64_t)st.st_size != o->size)
        rc = err_set(e, ERR_INVALID_DATA, "%s: changed size since it was listed (%llu bytes, now %llu)", o->path,
                     (unsigned long long)o->size, (unsigned long long)st.st_size);
    if (rc) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return ERR_OK;
}

int store_file_map(const struct store_object *o, struct store_blob *b, struct err *e)
{
    memset(b, 0, sizeof *b);
    int fd;
    int rc = store_file_open(o, &fd, e);
    if (rc)
        return rc;
    rc = store_read_fd(fd, o->path, b, e);
    close(fd);
    return rc;
}

int store_read_fd(int fd, const char *name, struct store_blob *b, struct err *e)
{
    memset(b, 0, sizeof *b);
    struct stat st;
    if (fstat(fd, &st) != 0)
        return err_set(e, ERR_IO, "%s: %s", name, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return err_set(e, ERR_DATA_UNAVAILABLE, "%s: not a regular file", name);
    if (st.st_size == 0) {
        b->data = "";
        return ERR_OK;
    }
    if ((uint64_t)st.st_size > SIZE_MAX)
        return err_set(e, ERR_NOMEM, "%s: too large to read", name);
    return read_exact(fd, name, (size_t)st.st_size, b, e);
}

void store_file_unmap(struct store_blob *b)
{
    free(b->own);
    memset(b, 0, sizeof *b);
}
