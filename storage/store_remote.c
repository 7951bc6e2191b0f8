/* store_remote.c — what s3:// and http(s):// share: their settings, and download → (cache) → mmap. */
#include "store_remote.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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
    c->list = r->list;
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

struct store_list_limits store_remote_list_limits(const struct store_url *u)
{
    struct store_list_limits l = u->remote ? u->remote->list : (struct store_list_limits){0};
    if (!l.max_bytes)
        l.max_bytes = STORE_LIST_MAX_BYTES;
    if (!l.max_keys)
        l.max_keys = STORE_LIST_MAX_KEYS;
    return l;
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
    dev_t dev;
    ino_t ino;
    bool locked;                      /* a parsed file: removed only under an exclusive flock */
};

struct cached_list {
    struct cached *v;
    size_t n, cap;
    uint64_t total;
};

static int older_first(const void *a, const void *b)
{
    const struct cached *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    return (x->used.tv_nsec > y->used.tv_nsec) - (x->used.tv_nsec < y->used.tv_nsec);
}

/* Adds dir's regular files, not temp files (".part." downloads, ".tmp." parsed files in flight), to l. */
static void scan(const char *dir, bool locked, struct cached_list *l)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        struct stat st;
        if (ent->d_name[0] == '.' || strstr(ent->d_name, ".part.") || strstr(ent->d_name, ".tmp.") ||
            fstatat(dirfd(d), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        l->total += (uint64_t)st.st_size;
        if (l->n == l->cap) {
            size_t nc = l->cap ? 2 * l->cap : 64;
            struct cached *nv = realloc(l->v, nc * sizeof *nv);
            if (!nv)
                break;
            l->v = nv;
            l->cap = nc;
        }
        struct cached *c = &l->v[l->n];
        if (asprintf(&c->path, "%s/%s", dir, ent->d_name) < 0)
            break;
        c->size = st.st_size;
        c->used = st.st_mtim;
        c->dev = st.st_dev;
        c->ino = st.st_ino;
        c->locked = locked;
        l->n++;
    }
    closedir(d);
}

/*
 * Removes a parsed file unless someone has it mapped: they hold LOCK_SH, so our
 * LOCK_EX|LOCK_NB fails and the file stays. A reader that opened it just before
 * the unlink keeps a valid (if now nameless) file: correct, only not shared.
 */
static bool remove_unlocked(const struct cached *c)
{
    int fd = open(c->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    struct stat st;
    bool gone = false;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 && st.st_dev == c->dev && st.st_ino == c->ino)
        gone = unlink(c->path) == 0;
    close(fd); /* drops the lock */
    return gone;
}

/*
 * Evictions take turns (an exclusive flock on dir/.evict, which scan skips, so across
 * jobs and processes too): two at once, each keeping the file it just wrote, would each
 * count the other's file as over the limit and remove it, leaving neither.
 */
static int evict_lock(const char *dir)
{
    char *path;
    if (asprintf(&path, "%s/.evict", dir) < 0)
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    free(path);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;   /* -1: evict unlocked all the same (best effort, as the rest) */
}

uint64_t store_cache_evict(const char *dir, uint64_t limit, const char *keep)
{
    struct cached_list l = {0};
    char *parsed;
    int lock = evict_lock(dir);
    scan(dir, false, &l);
    if (asprintf(&parsed, "%s/parsed", dir) >= 0) {
        scan(parsed, true, &l);
        free(parsed);
    }
    if (l.n > 1)
        qsort(l.v, l.n, sizeof *l.v, older_first);
    uint64_t removed = 0;
    for (size_t i = 0; i < l.n && l.total > limit; i++) {
        const struct cached *c = &l.v[i];
        if (keep && strcmp(c->path, keep) == 0)
            continue;
        if (c->locked ? remove_unlocked(c) : unlink(c->path) == 0) {
            l.total -= (uint64_t)c->size;
            removed += c->locked;
        }
    }
    if (lock >= 0)
        close(lock);   /* drops the flock */
    for (size_t i = 0; i < l.n; i++)
        free(l.v[i].path);
    free(l.v);
    return removed;
}

static int map_path(const char *path, struct store_blob *b, struct err *e)
{
    struct store_object local = {.path = (char *)path};
    return store_file_map(&local, b, e);
}

/* The derived file's path, when o may have one (a cache dir, an ETag); NULL otherwise. */
static char *derived_path(const struct store_url *u, const struct store_object *o, const char *suffix)
{
    const char *dir = u->remote ? u->remote->cache_dir : NULL;
    struct err e;
    char *base, *path;
    if (!dir || !dir[0] || !o->etag || !o->etag[0] || cache_path(dir, o, &base, &e) != ERR_OK)
        return NULL;
    if (asprintf(&path, "%s%s", base, suffix) < 0)
        path = NULL;
    free(base);
    return path;
}

bool store_remote_cache_get(const struct store_url *u, const struct store_object *o, const char *suffix,
                            void **data, size_t *len)
{
    char *path = derived_path(u, o, suffix);
    struct store_blob b = {0};
    struct err e;
    bool ok = path && map_path(path, &b, &e) == ERR_OK;
    if (ok) {
        (void)utimensat(AT_FDCWD, path, NULL, 0); /* used now: last in line for eviction */
        *len = b.len;
        *data = b.own ? b.own : malloc(1); /* an empty file is still an answer */
        ok = *data != NULL;
    }
    free(path);
    return ok;
}

void store_remote_cache_put(const struct store_url *u, const struct store_object *o, const char *suffix,
                            const void *data, size_t len)
{
    char *path = derived_path(u, o, suffix), *tmp = NULL;
    if (!path || (mkdir(u->remote->cache_dir, 0700) != 0 && errno != EEXIST) ||
        asprintf(&tmp, "%s.part.XXXXXX", path) < 0) {
        free(path);
        return;
    }
    int fd = mkstemp(tmp);
    bool ok = fd >= 0 && write(fd, data, len) == (ssize_t)len;
    if (fd >= 0)
        ok = close(fd) == 0 && ok;
    ok = ok && rename(tmp, path) == 0;
    if (!ok && fd >= 0)
        unlink(tmp);
    if (ok && u->remote->cache_limit)
        (void)store_cache_evict(u->remote->cache_dir, u->remote->cache_limit, path);
    free(tmp);
    free(path);
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
            (void)store_cache_evict(dir, u->remote->cache_limit, path); /* keeps this one: its next use is a hit */
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
