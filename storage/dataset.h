/* dataset.h — a dataset of CSV or Parquet partitions (file://, s3://, http(s)://) served as batches. */
#ifndef TRAIND_STORAGE_DATASET_H
#define TRAIND_STORAGE_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

enum store_dtype { STORE_F32, STORE_F64 };

struct store_remote;  /* store.h: how s3:// and http(s):// are reached */

enum dataset_header { DATASET_HEADER_AUTO, DATASET_HEADER_YES, DATASET_HEADER_NO };

/*
 * How partitions are read. AUTO: Parquet when every listed name ends in ".parquet", else CSV;
 * names starting with '_' or '.' (Hadoop's hidden files: Spark's _SUCCESS, .crc checksums) do
 * not count, and a Parquet dataset leaves them out, so a Spark output folder ("dir/") reads as
 * its part-*.parquet files.
 */
enum dataset_format { DATASET_FORMAT_AUTO, DATASET_FORMAT_CSV, DATASET_FORMAT_PARQUET };

/* A column by its name (a CSV header's, the Parquet schema's) or, name NULL, by its 0-based index. */
struct dataset_column {
    const char *name;
    int index;
};

struct dataset_config {
    const char *url;                    /* "file:///d/part*.csv", "/d/part*.csv", "d/part*.csv",
                                           "s3://bucket/prefix/part*.csv", "https://host/part-0.csv",
                                           "https://host/parts.list" (see store.h) */
    const struct store_remote *remote;  /* s3 endpoint/region/anonymous, cache dir (which also keeps the
                                           parsed partitions of any scheme: dataset_stats); NULL = environment */
    const char *shards_url;             /* glob of kaen's .meta/shards CSVs (id,count), or NULL */
    const char *const *data_roots;      /* file reads confined below these; NULL = anywhere */
    size_t n_data_roots;
    enum dataset_format format;         /* CSV or Parquet (parquet.h), or AUTO: by the names listed */
    enum dataset_header header;         /* CSV: decided on the first partition, then applied to all */
    int label_column;                   /* index of the label column in the CSV or the Parquet schema */
    const char *label_name;             /* or the label by its name (NULL: label_column) */
    const struct dataset_column *features; /* the features, in this order; NULL: every column but the
                                           label, in file order. Names need a CSV header or Parquet */
    size_t n_features;
    enum store_dtype dtype;             /* what batches are parsed into */
    size_t batch_size;
    bool drop_last;
    size_t resident_limit;              /* bytes of parsed rows kept in memory across epochs;
                                           0 = half the machine's RAM; beyond it partitions are re-read */
    /* Shuffling (the job spec's data.shuffle and seed); all zero = files in name order, rows in file order. */
    uint64_t seed;
    bool shuffle_partitions;            /* partition order of each epoch: a permutation of (seed, epoch) */
    size_t shuffle_buffer;              /* rows: each row is drawn at random from a buffer of this many,
                                           refilled in stream order (Petastorm's shuffling queue); 0 = off */
    /* A replica's reader (n > 1): of each batch only the rows of this rank's share (dataset_share) are
       written, the share's first row at dst (the batch's row count is what is returned: the share's
       follows from it), and partitions (Parquet row groups) that none of the rank's shares touch are
       not read. With a shuffle buffer every partition is read, since the buffer mixes rows of every
       partition into every share: the replica makes every draw of the whole batch, as one reader
       would, and copies out only its share's. */
    int share_rank, share_n;
    int parse_threads;                  /* threads parsing the next partitions while one is served, besides
                                           the reader's own: 0 = one per core beyond the first (at most 4),
                                           < 0 = none. Started by the first parse with SIGTERM and SIGINT
                                           blocked, joined by dataset_close */
};

/* Where the dataset is: the batch that the next call to dataset_next_batch returns. */
struct dataset_cursor {
    uint64_t epoch;
    uint64_t batch;                     /* index within the epoch */
};

struct dataset;

/* The rows [*lo, *lo + *count) of a batch of rows that rank takes of n: floor(rows * rank / n) up to the
   next rank's, so shares differ by one row at most, in rank order. */
void dataset_share(size_t rows, int rank, int n, size_t *lo, size_t *count);

/*
 * Lists the partitions (glob on the last path component, names sorted) and reads
 * the first one's header so the feature count is known before training starts.
 * Partitions without data rows (no bytes, blank lines, a header alone, or a count
 * of 0 in kaen's shards metadata, then never read) contribute no rows; the first
 * partition with a line decides the header and the columns, and open reads on to
 * the first with a row. Fails with ERR_DATA_UNAVAILABLE when nothing matches,
 * ERR_AUTH outside the data roots, ERR_INVALID_DATA with file, line and column for
 * a bad CSV, and ERR_INVALID_DATA naming the URL when no partition has a row.
 */
int dataset_open(const struct dataset_config *cfg, struct dataset **out, struct err *e);
void dataset_close(struct dataset *ds);

size_t dataset_num_features(const struct dataset *ds); /* columns other than the label */
size_t dataset_num_partitions(const struct dataset *ds);

/* Total rows of an epoch, or 0 while some partition's count is unknown (no shards entry, not read yet). */
uint64_t dataset_num_rows(const struct dataset *ds);
/* Rows of partition i (0 if unknown yet) and its name (the last URL component, e.g. "part-00003.csv"). */
uint64_t dataset_partition_rows(const struct dataset *ds, size_t i);
const char *dataset_partition_name(const struct dataset *ds, size_t i);
/* Bytes dst must hold for dataset_next_batch: batch_size x (1 + features) x dtype size; a replica's
   (share_n > 1) the most a share holds, ceil(batch_size / share_n) rows. */
size_t dataset_batch_bytes(const struct dataset *ds);
/* Bytes of one row of a batch: (1 + features) x dtype size. */
size_t dataset_row_bytes(const struct dataset *ds);
/* Bytes of parsed rows currently resident (kept for later epochs). */
size_t dataset_resident_bytes(const struct dataset *ds);

/*
 * What reading cost so far. With a cache dir (cfg->remote->cache_dir), each parsed
 * partition is also kept on disk under <cache dir>/parsed/ (any scheme, file://
 * included) and later opens, epochs and jobs map it (or read it into place, see
 * dataset_next_view) instead of parsing: a hit. Those files count towards
 * cache_limit with the downloads, least recently used go first, and one mapped by
 * an open dataset is never evicted (see storage/pcache.h).
 */
struct dataset_stats {
    uint64_t parsed;            /* partitions parsed from CSV (epochs that re-read count again) */
    uint64_t cache_hits;        /* partitions mapped or read from the parsed cache instead */
    uint64_t cache_misses;      /* looked up, not there (or stale, or corrupt: then deleted) */
    uint64_t cache_evictions;   /* parsed files this dataset's writes evicted to stay under the limit */
    uint64_t bytes_fetched;     /* bytes of the objects read from their store, network, disk or download
                                   cache: whole files for CSV; for Parquet the footers (at open) and the
                                   selected columns' chunks of each row group read (parsed-cache hits read none) */
    uint64_t bytes_total;       /* the listed objects' sizes (0 for those a server gives no size of) */
};
void dataset_stats(const struct dataset *ds, struct dataset_stats *s);

/* The cursor of the batch the next dataset_next_batch call returns (what a checkpoint stores). */
void dataset_tell(const struct dataset *ds, struct dataset_cursor *c);

/*
 * Writes the next batch into dst: rows x (1 + features), row-major, in the
 * configured dtype, the label in column 0 and the features after it in CSV
 * order. A batch spans partitions; batch size is independent of partition size.
 * At the end of an epoch a short batch is returned (unless drop_last) and the
 * next call starts the next epoch, so a caller asking for N iterations gets N
 * batches. Empty partitions are passed over: a batch never has 0 rows, and after
 * an epoch's last batch the cursor (dataset_tell) is already the next epoch's
 * first, drop_last or not, counts known ahead or not (empty partitions after it
 * are counted then; nothing is parsed). *rows gets the row count; *at (may be
 * NULL) the cursor of the batch.
 * dst must hold batch_size rows (dataset_batch_bytes; a replica writes its share's
 * rows only: dataset_config). Partitions are parsed when first reached, so
 * ERR_INVALID_DATA (file, line, column) can come from here too; on error the cursor
 * does not move. Not thread-safe: one caller per dataset.
 */
int dataset_next_batch(struct dataset *ds, void *dst, size_t *rows, struct dataset_cursor *at,
                       struct err *e);

/*
 * dataset_next_batch without the copy, where one can be had: once every partition's row
 * count of a dataset with no shuffling is known (from open with shards metadata, else once
 * reading has counted them all) and its rows fit the resident limit (beside a second copy of
 * those already resident, while they move), its rows lie in one buffer in order and each
 * batch is a run of them; partitions not read yet go there when read, cached ones read
 * straight into their place. Then *view points at the batch (rows x (1 + features), as
 * dataset_next_batch writes them; read only, valid until dataset_close). Otherwise *view
 * is NULL, nothing moved, and this batch is dataset_next_batch's to copy.
 */
int dataset_next_view(struct dataset *ds, const void **view, size_t *rows, struct dataset_cursor *at,
                      struct err *e);

/*
 * Makes the next batch the one at c (resume from a checkpoint, no replay): the
 * start row is batch x batch_size, found from partition row counts (shards
 * metadata, or counted lines; nothing is parsed). ERR_INVALID_ARG when the batch
 * is past the epoch's end, or is the short tail that drop_last drops.
 * With a shuffle buffer, the buffer's state at c is rebuilt by replaying the
 * epoch's draws on row indices only (no parsing, a few ns a row), then its rows
 * are copied from their partitions (parsed again only if they are not resident).
 */
int dataset_seek(struct dataset *ds, const struct dataset_cursor *c, struct err *e);

#endif
