/* parquet.h — Parquet partitions read from memory into rows of floats, as csv.h reads CSV. */
#ifndef TRAIND_STORAGE_PARQUET_H
#define TRAIND_STORAGE_PARQUET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csv.h"
#include "dataset.h"
#include "err.h"

/*
 * What is read: flat schemas (the root's leaf columns), REQUIRED or OPTIONAL; physical
 * types BOOLEAN, INT32, INT64, FLOAT, DOUBLE, with the logical types DECIMAL (the value
 * unscaled / 10^scale; also on FIXED_LEN_BYTE_ARRAY up to 16 bytes, while the unscaled value
 * fits 64 bits), DATE (days since 1970-01-01) and TIMESTAMP (seconds since the epoch,
 * as a decimal of 3, 6 or 9 digits: ms, us, ns) on the integers; encodings PLAIN, PLAIN_DICTIONARY and
 * RLE_DICTIONARY, BYTE_STREAM_SPLIT, DELTA_BINARY_PACKED, definition levels in the
 * RLE/bit-packed hybrid; data pages v1 and v2; codecs UNCOMPRESSED, SNAPPY, GZIP, ZSTD
 * and LZ4_RAW. Columns not selected are skipped without being decompressed, so they
 * may be of any type. A null in a selected column, a column of another type, and any
 * inconsistency (sizes, counts, offsets, dictionary indices) are ERR_INVALID_DATA
 * naming the file, the column and the row group.
 */

/* Which columns go where: output column j is file column cols[j]. */
struct parquet_select {
    const char *name;         /* for messages: the partition's URL or path */
    enum store_dtype dtype;
    const size_t *cols;
    size_t ncols;
};

/* Reads exactly `rows` rows into dst (rows x s->ncols, row-major, s->dtype); another count is ERR_INVALID_DATA. */
int parquet_read_rows(const struct parquet_select *s, const void *buf, size_t len, void *dst, uint64_t rows,
                      struct err *e);

/* The schema's leaf column called name (false for none, or a file whose footer does not read). */
bool parquet_column_named(const void *buf, size_t len, const char *name, size_t *col);

/*
 * csv_measure's and csv_parse_rows's counterparts for a dataset's partitions: f->cols, or the label column
 * first, then every other column in file order. parquet_measure reads the footer only: lay->ncols, the rows
 * (0 for a file without rows, which is no error), lay->schema; a file whose schema is not f->schema (when
 * set) is ERR_INVALID_DATA. lay->has_header is false.
 */
int parquet_measure(const struct csv_format *f, const char *buf, size_t len, struct csv_layout *lay,
                    uint64_t *rows, struct err *e);
int parquet_parse_rows(const struct csv_format *f, const char *buf, size_t len, void *dst, uint64_t rows,
                       struct err *e);

/*
 * Ranged reads, where a dataset's partition is one row group: the footer is fetched once (the
 * file's last 1/32, at least PARQUET_FOOTER_MIN and at most PARQUET_FOOTER_GUESS bytes, in one
 * read; the rest in a second when it is longer),
 * then each row group's selected column chunks, those less than PARQUET_COALESCE_GAP apart in
 * one read (the gap read too). rd reads len bytes at off of the file into dst.
 */
#define PARQUET_FOOTER_GUESS ((size_t)64 << 10)
#define PARQUET_FOOTER_MIN ((size_t)4 << 10)
#define PARQUET_COALESCE_GAP ((uint64_t)1 << 20)
typedef int (*parquet_read_fn)(void *arg, uint64_t off, size_t len, void *dst, struct err *e);

struct parquet_footer;

/* The footer of a file of size bytes, read with rd. */
int parquet_footer_fetch(const char *name, uint64_t size, parquet_read_fn rd, void *arg,
                         struct parquet_footer **out, struct err *e);
/* The same from bytes at hand: the file's last len bytes (parquet_footer_bytes of an earlier one). */
int parquet_footer_parse(const char *name, const void *tail, size_t len, uint64_t size,
                         struct parquet_footer **out, struct err *e);
void parquet_footer_free(struct parquet_footer *f);
const void *parquet_footer_bytes(const struct parquet_footer *f, size_t *len);
size_t parquet_footer_groups(const struct parquet_footer *f);
uint64_t parquet_footer_group_rows(const struct parquet_footer *f, size_t g);
bool parquet_footer_column_named(const struct parquet_footer *f, const char *name, size_t *col);
/* parquet_measure from a footer. */
int parquet_footer_measure(const struct csv_format *fm, const struct parquet_footer *f, struct csv_layout *lay,
                           uint64_t *rows, struct err *e);
/* parquet_parse_rows for row group g alone (`rows` rows, as its footer says), its chunks read with rd. */
int parquet_parse_group(const struct csv_format *fm, const struct parquet_footer *f, size_t g, parquet_read_fn rd,
                        void *arg, void *dst, uint64_t rows, struct err *e);

#endif
