/* pcache.c — the parsed-partition cache: key, lookup (read under a shared flock), write (temp, fsync, link). */
#include "pcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hugemem.h"
#include "parse_ahead.h"
#include "sha256.h"
#include "store_remote.h"

#define PC_MAGIC "TRDPARSD"
#define PC_VERSION 1u
#define PC_HEADER 64 /* keeps the rows 64-byte aligned in the buffer they are read into */

struct pc_header {
    char magic[8];
    uint32_t version, dtype;
    uint64_t rows, cols;
    unsigned char key[16];
    uint64_t checksum;
    uint64_t reserved;
};
_Static_assert(sizeof(struct pc_header) == PC_HEADER, "the header is 64 bytes");

static void count(uint64_t *c)
{
    __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

/*
 * Four FNV-style lanes over 8-byte words: each step is a bijection of the lane,
 * so any one changed word changes the sum. The lanes are four variables, not an
 * array, so that they stay in registers: four independent multiply chains run at
 * memory speed (an array kept them on the stack, and its store-to-load latency in
 * every chain made the sum several times slower than reading the rows).
 */
static inline uint64_t lane(uint64_t h, const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return (h ^ w) * 0x100000001b3ULL;
}

static uint64_t checksum(const unsigned char *p, size_t n)
{
    uint64_t h0 = 0xcbf29ce484222325ULL, h1 = 0x84222325cbf29ce4ULL, h2 = 0x9e3779b97f4a7c15ULL,
             h3 = 0x7f4a7c159e3779b9ULL;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        h0 = lane(h0, p + i);
        h1 = lane(h1, p + i + 8);
        h2 = lane(h2, p + i + 16);
        h3 = lane(h3, p + i + 24);
    }
    for (; i < n; i++)
        h0 = (h0 ^ p[i]) * 0x100000001b3ULL;
    return h0 ^ (h1 << 16 | h1 >> 48) ^ (h2 << 32 | h2 >> 32) ^ (h3 << 48 | h3 >> 16) ^ n;
}

static void hash_u64(struct sha256 *s, uint64_t v)
{
    sha256_update(s, &v, sizeof v);
}

/*
 * What the parsed form of obj depends on, hashed. file://: the file's identity now
 * (so an edited file misses); remote: URL, ETag and size as the download cache
 * keys them. False when there is nothing trustworthy to key on.
 */
static bool cache_key(const struct store_url *url, const struct store_object *obj, const struct csv_format *fmt,
                      unsigned char key[32])
{
    struct sha256 s;
    sha256_init(&s);
    sha256_update(&s, "traind-parsed", sizeof "traind-parsed");
    hash_u64(&s, PC_VERSION);
    hash_u64(&s, (uint64_t)url->scheme);
    sha256_update(&s, obj->path, strlen(obj->path) + 1);
    if (url->scheme == STORE_SCHEME_FILE) {
        struct stat st;
        if (stat(obj->path, &st) != 0)
            return false;
        hash_u64(&s, (uint64_t)st.st_dev);
        hash_u64(&s, (uint64_t)st.st_ino);
        hash_u64(&s, (uint64_t)st.st_size);
        hash_u64(&s, (uint64_t)st.st_mtim.tv_sec);
        hash_u64(&s, (uint64_t)st.st_mtim.tv_nsec);
    } else {
        if (!obj->etag || !obj->etag[0])
            return false;
        sha256_update(&s, obj->etag, strlen(obj->etag) + 1);
        hash_u64(&s, obj->size);
    }
    hash_u64(&s, (uint64_t)fmt->format);
    hash_u64(&s, (uint64_t)fmt->dtype);
    hash_u64(&s, (uint64_t)fmt->label);
    hash_u64(&s, (uint64_t)fmt->header);
    hash_u64(&s, (uint64_t)fmt->ncols);
    for (size_t j = 0; fmt->cols && j < fmt->n_cols; j++)
        hash_u64(&s, (uint64_t)fmt->cols[j]);
    if (fmt->footer) /* a row group, not the whole file */
        hash_u64(&s, (uint64_t)fmt->group + 1);
    sha256_final(&s, key);
    return true;
}

static char *file_name(const char *dir, const unsigned char key[32])
{
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    char *path;
    return asprintf(&path, "%s/parsed/%s.bin", dir, hex) < 0 ? NULL : path;
}

void pcache_release(struct pcache_map *m)
{
    if (!m->base)
        return;
    free(m->base);
    if (m->fd >= 0) {
        close(m->fd);
        __atomic_fetch_sub(&m->owner->locked, 1, __ATOMIC_RELAXED);
    }
    m->base = NULL;
}

/* The header says this file holds what we asked for, in a file of len bytes. */
static bool header_ok(const struct pc_header *h, size_t len, const struct csv_format *fmt, size_t stride,
                      const unsigned char key[32])
{
    return len >= PC_HEADER && memcmp(h->magic, PC_MAGIC, 8) == 0 && h->version == PC_VERSION &&
           h->dtype == (uint32_t)fmt->dtype && h->cols == fmt->ncols && memcmp(h->key, key, 16) == 0 &&
           h->rows != 0 && h->rows <= (len - PC_HEADER) / stride && PC_HEADER + h->rows * stride == len;
}

/* Deleted so that the parse after this can publish a good one (unless it was replaced meanwhile). */
static void discard(const char *path, const struct stat *st)
{
    struct stat now;
    if (stat(path, &now) == 0 && now.st_ino == st->st_ino && now.st_dev == st->st_dev)
        unlink(path);
}

static bool read_all(int fd, void *p, size_t n, off_t at)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = pread(fd, c, n, at);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        c += r;
        n -= (size_t)r;
        at += r;
    }
    return true;
}

/* A buffer for a whole parsed file, its rows 64-byte aligned as they were in a page-aligned map. */
static void *file_buffer(size_t len)
{
    void *p = NULL;
    if (len >= (size_t)4 << 20)
        return hugemem_alloc(len);
    return posix_memalign(&p, 64, len) == 0 ? p : NULL;
}

/* Reads path whole if it holds this partition, under a shared lock held until pcache_release. A file is
   trusted only whole: its header says what we asked for and its rows sum to the checksum. The rows are a
   copy, never a map of the file: a map of a file truncated under it raises SIGBUS, killing the daemon. */
static bool lookup(const char *path, const struct csv_format *fmt, size_t stride, const unsigned char key[32],
                   struct pcache_map *m)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    void *base = NULL;
    bool bad = false; /* seen and wrong, as opposed to unreadable for now */
    /* Shared: eviction's LOCK_EX|LOCK_NB fails while we hold it, so the file is never evicted in use. */
    if (flock(fd, LOCK_SH) == 0 && fstat(fd, &st) == 0) {
        bad = st.st_size < PC_HEADER;
        if (!bad && (base = file_buffer((size_t)st.st_size)) != NULL && !read_all(fd, base, (size_t)st.st_size, 0))
            bad = true; /* shorter than it said: truncated meanwhile */
    }
    if (base && !bad) {
        const struct pc_header *h = base;
        size_t len = (size_t)st.st_size;
        if (header_ok(h, len, fmt, stride, key) &&
            checksum((const unsigned char *)base + PC_HEADER, len - PC_HEADER) == h->checksum) {
            *m = (struct pcache_map){base, len, fd, NULL};
            (void)utimensat(AT_FDCWD, path, NULL, 0); /* used now: last in line for eviction */
            return true;
        }
        bad = true;
    }
    free(base);
    if (bad)
        discard(path, &st);
    close(fd);
    return false;
}

/*
 * Reads path's rows into into->at if it holds this partition with into->rows rows: 1.
 * 0: not there, unreadable, or bad (then deleted, as lookup does). -1: a good header
 * with another row count, which lookup's map is left to bring to the dataset's notice.
 */
static int lookup_into(const char *path, const struct csv_format *fmt, size_t stride, const unsigned char key[32],
                       const struct pcache_dest *into)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    struct pc_header h;
    int got = 0;
    bool bad = false;
    size_t bytes = (size_t)into->rows * stride;
    /* Under the shared lock only while reading: the copy is ours, eviction may take the file after. */
    if (flock(fd, LOCK_SH) == 0 && fstat(fd, &st) == 0) {
        if ((size_t)st.st_size < sizeof h)
            bad = true;
        else if (!read_all(fd, &h, sizeof h, 0))
            ; /* unreadable for now */
        else if (!header_ok(&h, (size_t)st.st_size, fmt, stride, key))
            bad = true;
        else if (h.rows != into->rows)
            got = -1;
        else if (read_all(fd, into->at, bytes, PC_HEADER)) {
            got = checksum(into->at, bytes) == h.checksum;
            bad = !got;
        }
    }
    if (bad)
        discard(path, &st);
    else if (got == 1)
        (void)utimensat(AT_FDCWD, path, NULL, 0); /* used now: last in line for eviction */
    close(fd);
    return got;
}

static bool write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

/*
 * Publishes the parsed rows as path: written and fsynced under a temp name, then
 * linked into place, which fails if another job got there first — theirs stands.
 * Best effort: a full disk only means the next job parses again.
 */
static bool publish(const struct pcache *pc, const char *path, const struct csv_format *fmt,
                    const unsigned char key[32], const void *rows, uint64_t n, size_t stride)
{
    char *parsed, *tmp;
    if (asprintf(&parsed, "%s/parsed", pc->dir) < 0)
        return false;
    bool ok = (mkdir(pc->dir, 0700) == 0 || errno == EEXIST) && (mkdir(parsed, 0700) == 0 || errno == EEXIST);
    free(parsed);
    if (!ok || asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0)
        return false;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        free(tmp);
        return false;
    }
    struct pc_header h = {.version = PC_VERSION, .dtype = (uint32_t)fmt->dtype, .rows = n, .cols = fmt->ncols};
    memcpy(h.magic, PC_MAGIC, 8);
    memcpy(h.key, key, 16);
    h.checksum = checksum(rows, (size_t)n * stride);
    ok = write_all(fd, &h, sizeof h) && write_all(fd, rows, (size_t)n * stride) && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    bool mine = ok && link(tmp, path) == 0;
    unlink(tmp);
    free(tmp);
    return mine;
}

int pcache_load(struct pcache *pc, const struct store_url *url, const struct store_object *obj,
                const struct csv_format *fmt, size_t stride, uint64_t expect, const struct pcache_dest *into,
                struct rows_bin *bin, void **rows, struct pcache_map *map, uint64_t *n, struct err *e)
{
    map->base = NULL;
    if (!pc)
        return parse_partition(url, obj, fmt, stride, expect, bin, rows, n, NULL, e);
    unsigned char key[32];
    char *path = NULL;
    bool keyed = pc->dir && cache_key(url, obj, fmt, key) && (path = file_name(pc->dir, key)) != NULL;
    int got = keyed && into && into->at ? lookup_into(path, fmt, stride, key, into) : -1;
    if (got > 0) {
        *rows = into->at;
        *n = into->rows;
        count(&pc->hits);
        free(path);
        return ERR_OK;
    }
    if (got < 0 && keyed && lookup(path, fmt, stride, key, map)) {
        map->owner = pc;
        if (__atomic_add_fetch(&pc->locked, 1, __ATOMIC_RELAXED) > PCACHE_MAX_LOCKED) {
            __atomic_fetch_sub(&pc->locked, 1, __ATOMIC_RELAXED);
            close(map->fd); /* see PCACHE_MAX_LOCKED */
            map->fd = -1;
        }
        const struct pc_header *h = map->base;
        *rows = (char *)map->base + PC_HEADER;
        *n = h->rows; /* a count other than the shards metadata's is the dataset's error to report */
        count(&pc->hits);
        free(path);
        return ERR_OK;
    }
    if (path)
        count(&pc->misses);
    count(&pc->parsed);
    int rc = parse_partition(url, obj, fmt, stride, expect, bin, rows, n, &pc->fetched, e);
    unsigned char after[32];
    /* Written only when the file did not change while it was parsed: the key must describe these rows. */
    if (rc == ERR_OK && *n > 0 && path && cache_key(url, obj, fmt, after) && memcmp(key, after, sizeof key) == 0 &&
        publish(pc, path, fmt, key, *rows, *n, stride) && pc->limit) {
        uint64_t gone = store_cache_evict(pc->dir, pc->limit, path);
        __atomic_fetch_add(&pc->evictions, gone, __ATOMIC_RELAXED);
    }
    free(path);
    return rc;
}
