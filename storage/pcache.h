/* pcache.h — internal to storage/: parsed partitions kept as binary files under <cache dir>/parsed/. */
#ifndef TRAIND_STORAGE_PCACHE_H
#define TRAIND_STORAGE_PCACHE_H

#include <stdint.h>

#include "csv.h"
#include "err.h"
#include "store.h"

struct rows_bin; /* parse_ahead.h */

/*
 * One dataset's view of the cache: where it is and its counters. The counters are
 * bumped by the reader and the parser threads alike (atomically).
 *
 * The file of a partition is <dir>/parsed/<sha256 of the key>.bin, the key being the
 * object's identity (file://: path, device, inode, size, mtime in ns; remote: URL,
 * ETag, size — no ETag, no caching), the dtype, label column, header decision,
 * column count, a Parquet partition's row group and the format version. It holds a 64-byte header (magic, version,
 * dtype, rows, columns, the key's first 16 bytes, a checksum of the rows) and then
 * rows x columns values, label first: exactly what the dataset keeps in memory.
 *
 * Concurrency: a file is written to a temp name, fsynced and published with link(2),
 * which fails if another job published first (the loser drops its copy and the
 * winner's file is the one every later job reads). A reader holds flock(LOCK_SH) on
 * the file for as long as it holds its rows; eviction (store_cache_evict) removes a
 * parsed file only under flock(LOCK_EX|LOCK_NB), so a file in use is never evicted.
 * A file that is short, has another header or fails its checksum is deleted and the
 * partition parsed again.
 *
 * A held lock is an open descriptor: past PCACHE_MAX_LOCKED files per dataset the
 * rest are held without one (eviction may then unlink them; the rows are a copy
 * read with pread, never a map, so only the next job misses), so a dataset of
 * thousands of partitions does not run the daemon out of descriptors.
 */
#define PCACHE_MAX_LOCKED 256

struct pcache {
    const char *dir;          /* the cache dir; NULL: no cache, only the parse counter */
    uint64_t limit;           /* bytes the whole cache dir may hold; 0 = no limit */
    uint64_t parsed;          /* partitions parsed from CSV */
    uint64_t hits, misses, evictions;
    uint64_t locked;          /* maps now holding a descriptor and its lock */
    uint64_t fetched;         /* bytes read from the store (dataset_stats.bytes_fetched) */
};

/* A parsed file read whole into base (ours, freed by pcache_release); base NULL when none. fd (or -1) holds the shared lock, counted in owner->locked. */
struct pcache_map {
    void *base;
    size_t len;
    int fd;
    struct pcache *owner;
};

/* Where a caller that knows a partition's row count wants its rows: at NULL for none. */
struct pcache_dest {
    void *at;                 /* rows x stride bytes */
    uint64_t rows;
};

/*
 * The parsed rows of one partition: read from the cache (*map set, *rows inside
 * it) or parsed (parse_partition: *rows from bin, *map left empty) and then written
 * to the cache, best effort. pc may have no dir: then it only parses. With into
 * (NULL or its at NULL: none), a cached file of into->rows rows is read into
 * into->at instead of being mapped (*rows == into->at, *map empty): one pass over
 * the file through read(2), whose copy out of the page cache is several times
 * faster than a first walk over a fresh map, and the checksum then runs over rows
 * already in the CPU's cache.
 */
int pcache_load(struct pcache *pc, const struct store_url *url, const struct store_object *obj,
                const struct csv_format *fmt, size_t stride, uint64_t expect, const struct pcache_dest *into,
                struct rows_bin *bin, void **rows, struct pcache_map *map, uint64_t *n, struct err *e);

/* Frees and unlocks (base NULL: nothing to do). */
void pcache_release(struct pcache_map *m);

#endif
