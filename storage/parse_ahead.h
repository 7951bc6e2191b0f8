/* parse_ahead.h — worker threads that parse the partitions a dataset will read next, while it serves this one. */
#ifndef TRAIND_STORAGE_PARSE_AHEAD_H
#define TRAIND_STORAGE_PARSE_AHEAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csv.h"
#include "err.h"
#include "pcache.h"
#include "store.h"

/*
 * Spare row buffers. A dataset that cannot keep its partitions parses every one
 * again each epoch; reusing their memory spares the kernel zeroing fresh pages
 * for each (about a third of a cold parse). Buffers from parse_partition carry
 * their capacity, so any of them can be handed back with rows_release.
 */
#define ROWS_BIN_SPARES 4
struct rows_bin {
    pthread_mutex_t mu;
    void *spare[ROWS_BIN_SPARES];
    size_t n;
};

int rows_bin_init(struct rows_bin *b, struct err *e);
void rows_bin_destroy(struct rows_bin *b); /* frees the spares */
void rows_bin_trim(struct rows_bin *b);    /* frees the spares; b stays usable */
/* Gives parsed rows back: kept as a spare in b when there is room, else freed (b NULL: freed). */
void rows_release(struct rows_bin *b, void *rows);

enum parse_state { PARSE_IDLE, PARSE_QUEUED, PARSE_RUNNING, PARSE_DONE };

/*
 * One partition to parse. The dataset owns it; the inputs must not change while
 * it is queued or running, and the results are the dataset's once parse_ahead_wait
 * says it is done (then it goes back to IDLE by the dataset's hand).
 */
struct parse_task {
    const struct store_url *url;
    const struct store_object *obj;
    struct csv_format fmt;        /* fmt.name: the partition's path */
    size_t stride;                /* bytes of one parsed row */
    uint64_t expect;              /* rows the shards metadata promises, or 0 */
    struct rows_bin *bin;         /* where row memory comes from and goes back to */
    struct pcache *cache;         /* parsed partitions on disk, and the counters */
    struct pcache_dest into;      /* where a cached file's rows are read (pcache_load), set by parse_ahead_submit */
    void *rows;                   /* results: rows x stride from bin, or inside map, or NULL with rc set */
    struct pcache_map map;        /* set when the rows came from the parsed-partition cache */
    uint64_t n;
    int rc;
    struct err err;
    enum parse_state state;       /* guarded by the pool's mutex */
    struct parse_task *next;      /* the queue */
};

/*
 * Maps a partition, reads its layout, counts and parses its rows into an array
 * from bin (or fresh memory; release it with rows_release) — the work itself. With expect > 0 (shards metadata) the counting pass is
 * skipped; a file with another count is ERR_INVALID_DATA "N rows, but shards metadata says M".
 * Without it, a file with no data rows (empty, blank, a header alone) gives *n = 0, *rows NULL.
 */
/* csv_measure or parquet_measure, as fmt->format says. */
int partition_measure(const struct csv_format *fmt, const char *buf, size_t len, struct csv_layout *lay, uint64_t *rows,
                      struct err *e);

/* A Parquet partition with fmt->footer is that file's row group fmt->group, its selected column chunks read
   by range. *fetched (NULL: not counted) grows by the bytes read from the store, atomically. */
int parse_partition(const struct store_url *url, const struct store_object *obj, const struct csv_format *fmt,
                    size_t stride, uint64_t expect, struct rows_bin *bin, void **rows, uint64_t *n,
                    uint64_t *fetched, struct err *e);

struct parse_ahead;

/* Starts `threads` workers (SIGTERM and SIGINT blocked). */
int parse_ahead_start(size_t threads, struct parse_ahead **out, struct err *e);

/* Queues an IDLE task, its rows to go to into if it has them cached (NULL: mapped or parsed as they come). */
void parse_ahead_submit(struct parse_ahead *pa, struct parse_task *t, const struct pcache_dest *into);

/*
 * For the task the reader needs now. Still queued: taken off the queue (IDLE),
 * false, and the reader parses it itself rather than wait behind others. Running:
 * the reader helps, parsing queued tasks on its own thread until it is done.
 * Done: true, IDLE again, and its results (rows, n, rc, err) are the caller's.
 */
bool parse_ahead_claim(struct parse_ahead *pa, struct parse_task *t);

/* Drops queued tasks, lets running ones finish, joins. The dataset then frees results still held. NULL is fine. */
void parse_ahead_stop(struct parse_ahead *pa);

#endif
