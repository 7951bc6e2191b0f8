/*
 * fuzz_parquet.c — the Parquet reader (storage/parquet*.c, thrift.c) over arbitrary bytes: the whole input is
 * the file, in a buffer of exactly its size, as a download is. The footer is read as a dataset reads it
 * (parquet_measure); then every column is decoded alone, in float64 and in float32, each into a
 * buffer of exactly rows values; then the columns that decoded are decoded together, which must give the same
 * values, and once with a row count one too many, which must be refused without writing past it.
 * Last, the file is read as a dataset over a store reads it: the footer by range
 * (parquet_footer_fetch), then each row group's chunks by range (parquet_parse_group), which must
 * give the rows of the whole-file read.
 * Invariants: a failure is ERR_INVALID_DATA (never another code, a crash or a leak); a file the
 * footer reader accepts has a column per leaf and its columns' names find themselves (the first of
 * a repeated name); decoding is the same column by column or together.
 */
#include <string.h>

#include "fuzz.h"
#include "parquet.h"
#include "parquet_meta.h"

/* Values decoded at most (rows x columns): an RLE run can claim millions of rows in a few bytes; past this
   only the footer is read. */
#define MAX_VALUES (1u << 18)

static int decode(const uint8_t *data, size_t size, const size_t *cols, size_t ncols, enum store_dtype dt,
                  void *dst, uint64_t rows)
{
    struct parquet_select s = {"fuzz.parquet", dt, cols, ncols};
    struct err e = {0};
    int rc = parquet_read_rows(&s, data, size, dst, rows, &e);
    FUZZ_CHECK(rc == ERR_OK || rc == ERR_INVALID_DATA, "rc %d: %s", rc, e.msg);
    FUZZ_CHECK(rc == ERR_OK || strstr(e.msg, "fuzz.parquet"), "a message without the file's name: %s", e.msg);
    return rc;
}

struct bytes {
    const uint8_t *data;
    size_t size;
};

/* A store's ranged read over the input: a range past its end is the server's short answer. */
static int read_range(void *arg, uint64_t off, size_t len, void *dst, struct err *e)
{
    const struct bytes *b = arg;
    if (off > b->size || len > b->size - off)
        return err_set(e, ERR_INVALID_DATA, "fuzz.parquet: bytes %llu+%zu of %zu", (unsigned long long)off, len,
                       b->size);
    memcpy(dst, b->data + off, len);
    return ERR_OK;
}

/* The selected columns read row group by row group by range: the rows of the whole-file read. */
static void check_ranged(const uint8_t *data, size_t size, size_t ncols, const size_t *cols, size_t n,
                         const double *joint, uint64_t rows)
{
    struct bytes b = {data, size};
    struct parquet_footer *f = NULL;
    struct err e = {0};
    int rc = parquet_footer_fetch("fuzz.parquet", size, read_range, &b, &f, &e);
    FUZZ_CHECK(rc == ERR_OK, "the footer reads whole, not by range: %s", e.msg);
    struct csv_format fmt = {.name = "fuzz.parquet", .dtype = STORE_F64, .ncols = ncols, .cols = cols, .n_cols = n};
    double *got = malloc((size_t)rows * n * sizeof *got);
    uint64_t first = 0;
    for (size_t g = 0; g < parquet_footer_groups(f); g++) {
        uint64_t r = parquet_footer_group_rows(f, g);
        FUZZ_CHECK(first + r <= rows, "row group %zu ends at row %llu of %llu", g, (unsigned long long)(first + r),
                   (unsigned long long)rows);
        rc = parquet_parse_group(&fmt, f, g, read_range, &b, got + first * n, r, &e);
        FUZZ_CHECK(rc == ERR_OK, "row group %zu: whole, the file reads; by range: %s", g, e.msg);
        first += r;
    }
    FUZZ_CHECK(first == rows, "row groups of %llu rows in all, %llu in the file", (unsigned long long)first,
               (unsigned long long)rows);
    FUZZ_CHECK(memcmp(got, joint, (size_t)rows * n * sizeof *got) == 0, "by range, other values than whole");
    free(got);
    parquet_footer_free(f);
}

/* Each column's name finds that column, or an earlier one of the same name. */
static void check_names(const uint8_t *data, size_t size, const struct pq_file *f)
{
    for (size_t c = 0; c < f->n_cols; c++) {
        char name[64];
        FUZZ_CHECK(f->cols[c].name, "column %zu has no name", c);
        if (f->cols[c].name_len >= sizeof name || memchr(f->cols[c].name, '\0', f->cols[c].name_len))
            continue;
        memcpy(name, f->cols[c].name, f->cols[c].name_len);
        name[f->cols[c].name_len] = '\0';
        size_t found = SIZE_MAX;
        FUZZ_CHECK(parquet_column_named(data, size, name, &found), "column %zu (%s) is not found by its name", c,
                   name);
        FUZZ_CHECK(found <= c && f->cols[found].name_len == f->cols[c].name_len &&
                   memcmp(f->cols[found].name, name, f->cols[c].name_len) == 0,
                   "column %zu (%s) found as column %zu", c, name, found);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct csv_format fmt = {.name = "fuzz.parquet", .dtype = STORE_F64};
    struct csv_layout lay;
    uint64_t rows;
    struct err e = {0};
    int rc = parquet_measure(&fmt, (const char *)data, size, &lay, &rows, &e);
    FUZZ_CHECK(rc == ERR_OK || rc == ERR_INVALID_DATA, "rc %d: %s", rc, e.msg);
    if (rc != ERR_OK)
        return 0;
    struct pq_file f;
    FUZZ_CHECK(pq_file_read("fuzz.parquet", data, size, &f, &e) == ERR_OK, "measured, then not read: %s", e.msg);
    FUZZ_CHECK(f.n_cols == lay.ncols && (uint64_t)f.num_rows == rows, "%zu columns, %llu rows; measured %zu, %llu",
               f.n_cols, (long long)f.num_rows, lay.ncols, (unsigned long long)rows);
    check_names(data, size, &f);
    size_t ncols = f.n_cols;
    pq_file_free(&f);
    if (rows == 0 || rows > MAX_VALUES / ncols)
        return 0;

    /* Alone, in both dtypes; the columns that decode in float64 are kept for the joint read. */
    size_t *ok = malloc(ncols * sizeof *ok), n_ok = 0;
    double *one = malloc((size_t)rows * sizeof *one);
    double *alone = malloc((size_t)rows * ncols * sizeof *alone);
    for (size_t c = 0; c < ncols; c++) {
        if (decode(data, size, &c, 1, STORE_F32, one, rows) == ERR_OK)
            FUZZ_CHECK(decode(data, size, &c, 1, STORE_F64, one, rows) == ERR_OK,
                       "column %zu decodes as float32, not as float64", c);
        else
            continue;
        memcpy(alone + n_ok * rows, one, (size_t)rows * sizeof *one);
        ok[n_ok++] = c;
    }
    if (n_ok > 1) {
        double *joint = malloc((size_t)rows * n_ok * sizeof *joint);
        FUZZ_CHECK(decode(data, size, ok, n_ok, STORE_F64, joint, rows) == ERR_OK,
                   "%zu columns decode alone, not together", n_ok);
        for (uint64_t r = 0; r < rows; r++)
            for (size_t j = 0; j < n_ok; j++)
                FUZZ_CHECK(memcmp(&joint[r * n_ok + j], &alone[j * rows + r], sizeof(double)) == 0,
                           "row %llu, column %zu: %.17g together, %.17g alone", (unsigned long long)r, ok[j],
                           joint[r * n_ok + j], alone[j * rows + r]);
        check_ranged(data, size, ncols, ok, n_ok, joint, rows);
        free(joint);
    }
    if (n_ok > 0) {
        double *more = malloc((size_t)(rows + 1) * n_ok * sizeof *more);
        FUZZ_CHECK(decode(data, size, ok, n_ok, STORE_F64, more, rows + 1) == ERR_INVALID_DATA,
                   "%llu rows read as %llu", (unsigned long long)rows, (unsigned long long)rows + 1);
        free(more);
    }
    free(alone);
    free(one);
    free(ok);
    return 0;
}
