/* store_file.c — the local file system as an object store: glob listing confined to data roots, mmap reads. */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* True when resolved path p is root itself or below it (component-wise, so /data2 is not below /data). */
static bool below(const char *p, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return true;
    while (n > 1 && root[n - 1] == '/')
        n--;
    return strncmp(p, root, n) == 0 && (p[n] == '/' || p[n] == '\0');
}

/* Roots are resolved at each check, so `..` and symlinks in a root are judged by where they lead. */
static bool allowed(const struct store_access *acc, const char *resolved)
{
    if (!acc || !acc->data_roots)
        return true;
    for (size_t i = 0; i < acc->n_data_roots; i++) {
        char root[PATH_MAX];
        if (acc->data_roots[i] && realpath(acc->data_roots[i], root) && below(resolved, root))
            return true;
    }
    return false;
}

static int cmp_name(const void *a, const void *b)
{
    const struct store_object *x = a, *y = b;
    return strcmp(x->name, y->name);
}

static int push(struct store_listing *l, size_t *cap, const char *name, const char *path, uint64_t size,
                struct err *e)
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
    if (!o->name || !o->path) {
        free(o->name);
        free(o->path);
        return err_set(e, ERR_NOMEM, "out of memory listing files");
    }
    l->n++;
    return ERR_OK;
}

/* Adds dir/name when it resolves to a regular file; a file outside the roots fails the whole listing. */
static int consider(const struct store_access *acc, const char *dir, const char *name,
                    struct store_listing *l, size_t *cap, struct err *e)
{
    char joined[PATH_MAX], resolved[PATH_MAX];
    int n = snprintf(joined, sizeof joined, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof joined)
        return err_set(e, ERR_INVALID_ARG, "path too long: %s/%s", dir, name);
    if (!realpath(joined, resolved))
        return ERR_OK; /* dangling link or raced away: not a file we can read */
    struct stat st;
    if (stat(resolved, &st) != 0 || !S_ISREG(st.st_mode))
        return ERR_OK;
    if (!allowed(acc, resolved))
        return err_set(e, ERR_AUTH, "%s: path outside --data-root", joined);
    return push(l, cap, name, resolved, (uint64_t)st.st_size, e);
}

int store_file_list(const struct store_url *u, const struct store_access *acc, struct store_listing *out,
                    struct err *e)
{
    memset(out, 0, sizeof *out);
    char dir[PATH_MAX];
    if (!realpath(u->location, dir)) {
        if (errno == ENOENT || errno == ENOTDIR)
            return err_set(e, ERR_DATA_UNAVAILABLE, "no such directory");
        return err_set(e, ERR_IO, "%s: %s", u->location, strerror(errno));
    }
    if (!allowed(acc, dir))
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

int store_file_map(const struct store_object *o, struct store_blob *b, struct err *e)
{
    memset(b, 0, sizeof *b);
    int fd = open(o->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int code = errno == ENOENT ? ERR_DATA_UNAVAILABLE : errno == EACCES ? ERR_AUTH : ERR_IO;
        return err_set(e, code, "%s: %s", o->path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = err_set(e, ERR_IO, "%s: %s", o->path, strerror(errno));
        close(fd);
        return rc;
    }
    if (st.st_size == 0) {
        close(fd);
        b->data = "";
        return ERR_OK;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd);
    if (m == MAP_FAILED)
        return err_set(e, saved == ENOMEM ? ERR_NOMEM : ERR_IO, "%s: mmap: %s", o->path, strerror(saved));
    /* The parser reads front to back once: let the kernel read ahead aggressively. */
    (void)madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
    b->data = m;
    b->len = (size_t)st.st_size;
    b->map = m;
    b->map_len = b->len;
    return ERR_OK;
}

void store_file_unmap(struct store_blob *b)
{
    if (b->map)
        munmap(b->map, b->map_len);
    memset(b, 0, sizeof *b);
}
