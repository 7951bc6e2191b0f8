/* csv.h — a numeric CSV parser over an in-memory (mmap'ed) buffer, writing rows straight into float arrays. */
#ifndef TRAIND_STORAGE_CSV_H
#define TRAIND_STORAGE_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h" /* enum store_dtype, enum dataset_header */
#include "err.h"

struct parquet_footer; /* parquet.h */

/*
 * The accepted text, decided once for every partition:
 * - fields are separated by ',' and lines end in "\n" or "\r\n"; the last line may
 *   lack its newline; empty lines (anywhere) are skipped but still counted for
 *   line numbers;
 * - spaces and tabs around a field are ignored; a leading UTF-8 byte order mark is skipped;
 * - a field is [+-] digits [. digits] [e|E [+-] digits], with at least one digit
 *   before or after the point ("5." and ".5" are numbers). Everything else is
 *   "not a number": empty fields, quotes, "nan", "inf", hex, a trailing "1e";
 * - values are bit-identical to strtod (float64) or strtof (float32), overflow
 *   included (it gives ±inf, as strtod does). The fallback calls strtod/strtof,
 *   which read the decimal point of the C locale the daemon runs in.
 * Errors name the source, a 1-based line and column, and never the field's text.
 */
struct csv_format {
    const char *name;             /* for messages: the partition's URL or path */
    enum dataset_format format;   /* a dataset's partitions may be Parquet (parquet.h) instead: never AUTO here */
    enum dataset_header header;   /* AUTO: the first row is a header if any field is not a number */
    enum store_dtype dtype;
    size_t label;                 /* CSV column moved to column 0 of each output row */
    size_t ncols;                 /* columns every row must have; 0 = learn from the first row */
    uint64_t schema;              /* Parquet: what csv_layout.schema must be (0: anything) */
    const size_t *cols;           /* a selection: output column j is file column cols[j], cols[0] == label;
                                     NULL: the label, then every other column in file order */
    size_t n_cols;                /* cols' length */
    const struct parquet_footer *footer; /* Parquet: the file's footer, read at open, when the partition is
                                     one row group of it (parquet.h); NULL: the whole file */
    size_t group;                 /* that row group */
};

/* What csv_probe learned from the first row. */
struct csv_layout {
    size_t ncols;
    bool has_header;
    size_t data_off;              /* byte offset of the first line after the header */
    uint64_t data_line;           /* its 1-based line number */
    uint64_t schema;              /* Parquet: a hash of the column names and types, in order (never 0) */
};

/* Reads only the first non-empty line: header or not, and the column count. */
int csv_probe(const struct csv_format *f, const char *buf, size_t len, struct csv_layout *lay,
              struct err *e);

/* Counts data rows (non-empty lines after the header); a file with none is ERR_INVALID_DATA. */
int csv_count_rows(const struct csv_format *f, const struct csv_layout *lay, const char *buf, size_t len,
                   uint64_t *rows, struct err *e);

/*
 * csv_probe and csv_count_rows for one partition of many, where a file without data
 * rows (no bytes, blank lines only, or a header alone) is no error: *rows = 0, and
 * lay->ncols = 0 when not even a header says the columns. A bad or ragged first line
 * still is.
 */
int csv_measure(const struct csv_format *f, const char *buf, size_t len, struct csv_layout *lay, uint64_t *rows,
                struct err *e);

/*
 * Parses exactly `rows` data rows into dst (rows x ncols, row-major, f->dtype), with
 * CSV column f->label written to column 0 and the others after it in CSV order.
 * rows comes from csv_count_rows or from metadata; a file with more or fewer
 * data rows is ERR_INVALID_DATA. With f->cols, dst still holds rows x ncols values,
 * and the rows are then packed to f->n_cols columns, the selected ones in their order.
 */
int csv_parse_rows(const struct csv_format *f, const struct csv_layout *lay, const char *buf, size_t len,
                   void *dst, uint64_t rows, struct err *e);

/* The first row's column whose text (blanks and one pair of double quotes around it dropped) is name. */
bool csv_column_named(const char *buf, size_t len, const char *name, size_t *col);

/*
 * One number starting exactly at p (no spaces skipped): returns the first byte after
 * it, or NULL when [p, end) does not start with a number in the grammar above.
 */
const char *csv_scan_f64(const char *p, const char *end, double *out);
const char *csv_scan_f32(const char *p, const char *end, float *out);

#endif
