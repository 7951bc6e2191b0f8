/* store_remote.c — what s3:// and http(s):// share: their settings, and download → (cache) → mmap. */
#include "store_remote.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"

void store_remote_free(struct store_remote *r)
{
    if (!r)
        return;
    free((char *)r->s3_endpoint);
    free((char *)r->s3_region);
    free((char *)r->cache_dir);
    if (r->http)
        free((char *)r->http->connect_to);
    free((struct http_options *)r->http);
    free(r);
}

static bool dup_field(const char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return true;
    char *d = strdup(src);
    *dst = d;
    return d != NULL;
}

int store_url_set_remote(struct store_url *u, const struct store_remote *r, struct err *e)
{
    store_remote_free(u->remote);
    u->remote = NULL;
    if (!r)
        return ERR_OK;
    struct store_remote *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(e, ERR_NOMEM, "out of memory");
    c->s3_anonymous = r->s3_anonymous;
    c->cache_limit = r->cache_limit;
    bool ok = dup_field(&c->s3_endpoint, r->s3_endpoint) && dup_field(&c->s3_region, r->s3_region) &&
              dup_field(&c->cache_dir, r->cache_dir);
    if (ok && r->http) {
        /* cancel stays a pointer: it is the caller's flag, meant to be shared. */
        struct http_options *h = malloc(sizeof *h);
        if (h) {
            *h = *r->http;
            ok = dup_field(&h->connect_to, r->http->connect_to);
        }
        c->http = h;
        ok = ok && h != NULL;
    }
    if (!ok) {
        store_remote_free(c);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    u->remote = c;
    return ERR_OK;
}

void store_remote_http_options(const struct store_url *u, struct http_options *o)
{
    if (u->remote && u->remote->http)
        *o = *u->remote->http;
    else
        http_options_default(o);
}

/* A file name for the cache: sha256(url, etag, size) keeps versions apart; the name keeps it readable. */
static int cache_path(const char *dir, const struct store_object *o, char **out, struct err *e)
{
    struct sha256 s;
    unsigned char d[32];
    char size[32];
    snprintf(size, sizeof size, "%llu", (unsigned long long)o->size);
    sha256_init(&s);
    sha256_update(&s, o->path, strlen(o->path) + 1);
    sha256_update(&s, o->etag, strlen(o->etag) + 1);
    sha256_update(&s, size, strlen(size));
    sha256_final(&s, d);
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    char name[96];
    size_t j = 0;
    for (const char *p = o->name; *p && j < sizeof name - 1; p++)
        name[j++] = (*p == '/' || *p == '\\' || (unsigned char)*p < 0x20) ? '_' : *p;
    name[j] = '\0';
    if (asprintf(out, "%s/%s-%s", dir, hex, name) < 0) {
        *out = NULL;
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    return ERR_OK;
}

struct cached {
    char *path;
    off_t size;
    struct timespec used;
};

static int older_first(const void *a, const void *b)
{
    const struct cached *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    return (x->used.tv_nsec > y->used.tv_nsec) - (x->used.tv_nsec < y->used.tv_nsec);
}

/*
 * Brings dir under limit bytes by removing the least recently used files (mtime,
 * which a cache hit refreshes), never keep (the file just mapped, so that its next
 * use is a hit) nor the temp files of downloads in flight. Best effort: a failure
 * here only costs disk space.
 */
static void evict(const char *dir, uint64_t limit, const char *keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct cached *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        struct stat st;
        if (ent->d_name[0] == '.' || strstr(ent->d_name, ".part.") ||
            fstatat(dirfd(d), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        total += (uint64_t)st.st_size;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            struct cached *nv = realloc(v, nc * sizeof *nv);
            if (!nv)
                break;
            v = nv;
            cap = nc;
        }
        if (asprintf(&v[n].path, "%s/%s", dir, ent->d_name) < 0)
            break;
        v[n].size = st.st_size;
        v[n].used = st.st_mtim;
        n++;
    }
    closedir(d);
    if (n > 1)
        qsort(v, n, sizeof *v, older_first);
    for (size_t i = 0; i < n && total > limit; i++) {
        if (strcmp(v[i].path, keep) != 0 && unlink(v[i].path) == 0)
            total -= (uint64_t)v[i].size;
    }
    for (size_t i = 0; i < n; i++)
        free(v[i].path);
    free(v);
}

static int map_path(const char *path, struct store_blob *b, struct err *e)
{
    struct store_object local = {.path = (char *)path};
    return store_file_map(&local, b, e);
}

/* The body must be as long as the listing said (when it said). */
static int check_size(const struct store_object *o, const char *path, struct err *e)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return err_set(e, ERR_IO, "%s: %s", path, strerror(errno));
    if (o->size && (uint64_t)st.st_size != o->size)
        return err_set(e, ERR_DATA_UNAVAILABLE, "%s: %llu bytes downloaded, the listing said %llu", o->path,
                       (unsigned long long)st.st_size, (unsigned long long)o->size);
    return ERR_OK;
}

int store_remote_map(const struct store_url *u, const struct store_object *o, store_remote_fetch_fn fetch,
                     void *arg, struct store_blob *b, struct err *e)
{
    memset(b, 0, sizeof *b);
    const char *dir = u->remote ? u->remote->cache_dir : NULL;
    /* Only a version the server named (by ETag) may be served from the cache. */
    if (dir && o->etag && o->etag[0]) {
        char *path;
        int rc = cache_path(dir, o, &path, e);
        if (rc)
            return rc;
        struct stat st;
        if (stat(path, &st) != 0 || (o->size && (uint64_t)st.st_size != o->size)) {
            if (mkdir(dir, 0700) != 0 && errno != EEXIST)
                rc = err_set(e, ERR_IO, "cache dir %s: %s", dir, strerror(errno));
            if (rc == ERR_OK)
                rc = fetch(arg, u, o, path, e);
            if (rc == ERR_OK && (rc = check_size(o, path, e)) != ERR_OK)
                unlink(path);
        } else {
            (void)utimensat(AT_FDCWD, path, NULL, 0);   /* used now: last in line for eviction */
        }
        if (rc == ERR_OK)
            rc = map_path(path, b, e);
        if (rc == ERR_OK && u->remote->cache_limit)
            evict(dir, u->remote->cache_limit, path);
        free(path);
        return rc;
    }
    /* No cache: a private temp file, unlinked as soon as it is mapped (the mapping keeps the bytes). */
    const char *tmp = getenv("TMPDIR");
    char *path;
    if (asprintf(&path, "%s/traind-download-XXXXXX", tmp && *tmp ? tmp : "/tmp") < 0)
        return err_set(e, ERR_NOMEM, "out of memory");
    int fd = mkstemp(path);
    if (fd < 0) {
        int rc = err_set(e, ERR_IO, "temp file %s: %s", path, strerror(errno));
        free(path);
        return rc;
    }
    close(fd);
    int rc = fetch(arg, u, o, path, e);
    if (rc == ERR_OK)
        rc = check_size(o, path, e);
    if (rc == ERR_OK)
        rc = map_path(path, b, e);
    unlink(path);
    free(path);
    return rc;
}
