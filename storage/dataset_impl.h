/* dataset_impl.h — internal to storage/: the dataset's state, shared by dataset.c and dataset_flat.c. */
#ifndef TRAIND_STORAGE_DATASET_IMPL_H
#define TRAIND_STORAGE_DATASET_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "csv.h"
#include "dataset.h"
#include "parse_ahead.h"
#include "pcache.h"
#include "shuffle.h"
#include "store.h"

#define NO_PART ((size_t)-1)

struct part {
    const struct store_object *obj; /* owned by the listing */
    uint64_t rows;                  /* valid when known */
    bool known;
    bool from_shards;               /* rows came from metadata: check them when the file is read */
    void *data;                     /* parsed rows kept for later epochs (inside flat, once flat), or NULL */
    size_t flat_at;                 /* where its rows go in flat, once flat is made */
    struct pcache_map map;          /* set when data lies in a mapped parsed-cache file */
    struct parse_task ahead;        /* parsing on a worker before the reader gets here */
    const struct parquet_footer *footer; /* Parquet: the file's footer (in ds->footers); the part is a row group */
    size_t group;                   /* which */
};

struct dataset {
    char *url_text;
    struct store_url url;
    struct store_listing list;
    struct parquet_footer **footers; /* Parquet: one a listed object, read at open */
    struct part *parts;             /* Parquet: a row group each, in file order then group order */
    size_t n;
    uint64_t bytes_total;           /* the listed objects' sizes (0 where a server gives none) */

    struct csv_format fmt;          /* header decided by the first partition, ncols fixed by it */
    size_t *cols;                   /* fmt.cols when the spec chose columns: label, then the features */
    size_t stride;                  /* bytes of one output row */
    size_t batch_size;
    bool drop_last;

    size_t resident_limit, resident_bytes;
    char *flat;                     /* every partition's rows in one buffer, in order (dataset_flat.c) */
    size_t flat_bytes;              /* its size; resident_bytes reaches it once every partition is in */
    size_t threads;                 /* parser threads besides the reader; the pool starts on the first parse */
    struct parse_ahead *pool;
    bool pool_failed;               /* could not start one: parse on the reader's thread only */
    struct rows_bin bin;            /* row memory of partitions not kept, for the next ones */
    bool bin_ok;
    void *scratch;                  /* the one partition being served when it is not resident */
    struct pcache_map scratch_map;  /* set when scratch lies in a mapped parsed-cache file */
    size_t scratch_part;
    struct pcache cache;            /* parsed partitions under the cache dir; its counters */

    int share_rank, share_n;        /* a replica's share of each batch (dataset_config); share_n 0: all */
    uint64_t *share_starts;         /* the epoch's row at which its k-th partition starts, for epoch */
    uint64_t share_epoch;           /*  share_epoch, once every count is known (read_ahead) */

    uint64_t seed;
    bool shuffle_partitions;
    size_t *perm;                   /* partition order of epoch perm_epoch, when shuffled */
    uint64_t perm_epoch;

    /* The shuffle buffer: buf_n rows drawn from at random, refilled from the stream (pi, row). */
    size_t buf_cap, buf_n;
    size_t buf_alloc;               /* rows buf_rows holds: buf_cap, or fewer when the epoch is known smaller */
    char *buf_rows;
    bool buf_primed;                /* filled for this epoch (the first batch of an epoch fills it) */
    bool buf_stale;                 /* an error left it out of step with the cursor: rebuild first */
    struct shuffle_rng buf_rng;

    /* the cursor: the next batch is batch `batch` of the epoch; the row stream goes on at row `row`
       of the epoch's pi-th partition (with a buffer, the buffer's rows come first) */
    uint64_t epoch, batch;
    size_t pi;
    uint64_t row;
};

/* The format partition i is read with: the dataset's, naming its file (and row group). */
struct csv_format dataset_part_format(const struct dataset *ds, size_t i);

/* Gives back a partition's rows: unmapped when they came from the parsed cache, else to the bin (NULL: freed). */
void dataset_rows_free(struct rows_bin *bin, void *rows, struct pcache_map *map);

/* Maps partition i and counts its rows (no parsing), learning or checking the count. strict: a
   file without rows is an error saying where (line and column). */
int dataset_part_measure(struct dataset *ds, size_t i, struct csv_layout *lay, bool strict, struct err *e);
/* No data rows (no bytes, blank lines, a header alone, or kaen's count 0): skipped, never read again. */
bool dataset_part_empty(const struct dataset *ds, size_t i);

/*
 * dataset_next_batch, and the view behind dataset_next_view: with view set, nothing is
 * copied and *view gets the batch's first row, the stream's rows being contiguous
 * (ERR_INTERNAL if they are not). dst or view, not both.
 */
int dataset_take_batch(struct dataset *ds, void *dst, const char **view, size_t *rows,
                       struct dataset_cursor *at, struct err *e);

/* Makes ds->flat for an unshuffled dataset whose row counts are all known, when it fits (dataset_flat.c). */
void dataset_flatten(struct dataset *ds);
/* Moves partition i's freshly read rows into its place in ds->flat; *rows then points there. */
void dataset_place(struct dataset *ds, size_t i, void **rows, struct pcache_map *map);

#endif
