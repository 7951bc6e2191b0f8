/* test_parquet.c — Parquet files written by DuckDB (tests/fixtures/parquet) decode to the values of the CSV
   DuckDB wrote them from; damaged files are invalid_data naming file, column and row group. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"
#include "dataset.h"
#include "store.h"
#include "parquet.h"
#include "tmpdir.h"

#define DIR FIXTURES_DIR "/parquet/"
#define NCOLS 7 /* y,a,b,c,d,e,k */

struct file {
    char *data;
    size_t len;
};

static struct file slurp(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, DIR "%s", name);
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp, "cannot open %s", path);
    struct file f = {0};
    cr_assert_eq(fseek(fp, 0, SEEK_END), 0);
    f.len = (size_t)ftell(fp);
    rewind(fp);
    f.data = malloc(f.len + 1);
    cr_assert_not_null(f.data);
    cr_assert_eq(fread(f.data, 1, f.len, fp), f.len);
    fclose(fp);
    return f;
}

/* values.csv, the truth: rows x 7 doubles, label (y) first as the dataset lays rows out. */
static double *csv_truth(uint64_t *rows)
{
    struct file f = slurp("values.csv");
    struct csv_format fmt = {.name = "values.csv", .header = DATASET_HEADER_YES, .dtype = STORE_F64};
    struct csv_layout lay;
    struct err e = {0};
    cr_assert_eq(csv_probe(&fmt, f.data, f.len, &lay, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(lay.ncols, NCOLS);
    cr_assert_eq(csv_count_rows(&fmt, &lay, f.data, f.len, rows, &e), ERR_OK, "%s", e.msg);
    double *v = malloc(*rows * NCOLS * sizeof *v);
    cr_assert_eq(csv_parse_rows(&fmt, &lay, f.data, f.len, v, *rows, &e), ERR_OK, "%s", e.msg);
    free(f.data);
    return v;
}

/* Decodes a fixture as a dataset does (label 0, every column) in the given dtype. */
static int decode(const char *name, const struct file *f, enum store_dtype dt, void *dst, uint64_t *rows,
                  struct err *e)
{
    struct csv_format fmt = {.name = name, .dtype = dt};
    struct csv_layout lay;
    int rc = parquet_measure(&fmt, f->data, f->len, &lay, rows, e);
    if (rc)
        return rc;
    fmt.ncols = lay.ncols;
    return parquet_parse_rows(&fmt, f->data, f->len, dst, *rows, e);
}

static void check_equals_csv(const char *name)
{
    uint64_t n_csv, n;
    double *want = csv_truth(&n_csv);
    struct file f = slurp(name);
    double *got = calloc(n_csv * NCOLS, sizeof *got);
    struct err e = {0};
    cr_assert_eq(decode(name, &f, STORE_F64, got, &n, &e), ERR_OK, "%s: %s", name, e.msg);
    cr_assert_eq(n, n_csv, "%s: %" PRIu64 " rows, the CSV has %" PRIu64, name, n, n_csv);
    for (uint64_t i = 0; i < n * NCOLS; i++)
        cr_assert(memcmp(&got[i], &want[i], sizeof(double)) == 0, "%s: row %" PRIu64 ", column %" PRIu64
                  ": %.17g, the CSV says %.17g", name, i / NCOLS, i % NCOLS, got[i], want[i]);
    free(got);
    free(want);
    free(f.data);
}

Test(parquet, plain_uncompressed_equals_the_csv) { check_equals_csv("plain_uncompressed.parquet"); }
Test(parquet, dictionary_uncompressed_equals_the_csv) { check_equals_csv("dict_uncompressed.parquet"); }
Test(parquet, snappy_equals_the_csv) { check_equals_csv("snappy.parquet"); }
Test(parquet, gzip_equals_the_csv) { check_equals_csv("gzip.parquet"); }
Test(parquet, zstd_equals_the_csv) { check_equals_csv("zstd.parquet"); }
Test(parquet, lz4_raw_equals_the_csv) { check_equals_csv("lz4_raw.parquet"); }
Test(parquet, v2_pages_delta_and_byte_stream_split_equal_the_csv) { check_equals_csv("v2_zstd.parquet"); }

Test(parquet, float32_holds_each_value_rounded_once)
{
    uint64_t n_csv, n;
    double *want = csv_truth(&n_csv);
    struct file f = slurp("snappy.parquet");
    float *got = calloc(n_csv * NCOLS, sizeof *got);
    struct err e = {0};
    cr_assert_eq(decode("snappy.parquet", &f, STORE_F32, got, &n, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(n, n_csv);
    /* Every column's value is exact in a double (DOUBLE columns, integers below 2^53), so one rounding to float. */
    for (uint64_t i = 0; i < n * NCOLS; i++) {
        float w = (float)want[i];
        cr_assert(memcmp(&got[i], &w, sizeof w) == 0, "row %" PRIu64 ", column %" PRIu64 ": %.9g, want %.9g",
                  i / NCOLS, i % NCOLS, (double)got[i], (double)w);
    }
    free(got);
    free(want);
    free(f.data);
}

Test(parquet, selected_columns_come_in_the_asked_order_and_text_columns_are_skipped)
{
    uint64_t n_csv;
    double *want = csv_truth(&n_csv);
    struct file f = slurp("with_text.parquet"); /* y, s (text), a */
    size_t cols[] = {2, 0};
    struct parquet_select s = {"with_text.parquet", STORE_F64, cols, 2};
    double *got = calloc(n_csv * 2, sizeof *got);
    struct err e = {0};
    cr_assert_eq(parquet_read_rows(&s, f.data, f.len, got, n_csv, &e), ERR_OK, "%s", e.msg);
    for (uint64_t r = 0; r < n_csv; r++) {
        cr_assert(memcmp(&got[2 * r], &want[r * NCOLS + 1], 8) == 0, "row %" PRIu64 " a", r);
        cr_assert(memcmp(&got[2 * r + 1], &want[r * NCOLS], 8) == 0, "row %" PRIu64 " y", r);
    }
    free(got);
    free(want);
    free(f.data);
}

Test(parquet, a_selected_text_column_is_invalid_data_naming_it)
{
    struct file f = slurp("with_text.parquet");
    size_t cols[] = {1};
    struct parquet_select s = {"with_text.parquet", STORE_F64, cols, 1};
    double *got = calloc(4096, sizeof *got);
    struct err e = {0};
    cr_assert_eq(parquet_read_rows(&s, f.data, f.len, got, 2200, &e), ERR_INVALID_DATA, "%s", e.msg);
    cr_assert(strstr(e.msg, "with_text.parquet: column s: BYTE_ARRAY is not a number"), "%s", e.msg);
    free(got);
    free(f.data);
}

/* Decoding a damaged copy fails with invalid_data whose message holds every one of the wanted pieces. */
static void expect_invalid(const char *name, const struct file *f, const char *const *pieces)
{
    double *got = calloc(2200 * NCOLS, sizeof *got);
    uint64_t n = 0;
    struct err e = {0};
    cr_assert_eq(decode(name, f, STORE_F64, got, &n, &e), ERR_INVALID_DATA, "%s: %s", name, e.msg);
    for (; *pieces; pieces++)
        cr_assert(strstr(e.msg, *pieces), "\"%s\" lacks \"%s\"", e.msg, *pieces);
    free(got);
}

Test(parquet, a_null_in_a_selected_column_names_file_column_row_group_and_row)
{
    struct file f = slurp("nulls.parquet");
    expect_invalid("nulls.parquet", &f,
                   (const char *const[]){"nulls.parquet: column a, row group 1:", "null at row 2100", NULL});
    free(f.data);
}

Test(parquet, a_truncated_file_is_invalid_data)
{
    struct file f = slurp("snappy.parquet");
    f.len -= 100;
    expect_invalid("cut.parquet", &f, (const char *const[]){"cut.parquet: not a Parquet file", NULL});
    f.len = 10;
    expect_invalid("cut.parquet", &f, (const char *const[]){"cut.parquet: 10 bytes", NULL});
    free(f.data);
}

Test(parquet, bad_magic_is_invalid_data)
{
    struct file f = slurp("snappy.parquet");
    f.data[0] = 'Q';
    expect_invalid("magic.parquet", &f, (const char *const[]){"magic.parquet: not a Parquet file", NULL});
    f.data[0] = 'P';
    f.data[f.len - 1] = '2';
    expect_invalid("magic.parquet", &f, (const char *const[]){"magic.parquet: not a Parquet file", NULL});
    free(f.data);
}

Test(parquet, a_footer_longer_than_the_file_is_invalid_data)
{
    struct file f = slurp("snappy.parquet");
    unsigned char *l = (unsigned char *)f.data + f.len - 8;
    uint32_t len = (uint32_t)f.len - 8 + 1;
    for (int i = 0; i < 4; i++)
        l[i] = (unsigned char)(len >> (8 * i));
    expect_invalid("footer.parquet", &f, (const char *const[]){"footer.parquet: footer of", NULL});
    free(f.data);
}

/* DuckDB's own account of where a chunk's pages are (chunks.txt): its dictionary and first data page offsets. */
static void chunk_offsets(const char *file, const char *column, int group, long *dict, long *data)
{
    FILE *fp = fopen(DIR "chunks.txt", "r");
    cr_assert_not_null(fp);
    char f[128], c[64], codec[32], enc[128];
    int g;
    while (fscanf(fp, "%127s %63s %d %31s %127s %ld %ld", f, c, &g, codec, enc, dict, data) == 7)
        if (strcmp(f, file) == 0 && strcmp(c, column) == 0 && g == group) {
            fclose(fp);
            return;
        }
    fclose(fp);
    cr_assert_fail("%s %s %d is not in chunks.txt", file, column, group);
}

/* How many row groups DuckDB wrote into file (chunks.txt). */
static size_t row_groups(const char *file)
{
    FILE *fp = fopen(DIR "chunks.txt", "r");
    cr_assert_not_null(fp);
    char f[128], c[64], codec[32], enc[128];
    int g, most = -1;
    long dict, data;
    while (fscanf(fp, "%127s %63s %d %31s %127s %ld %ld", f, c, &g, codec, enc, &dict, &data) == 7)
        if (strcmp(f, file) == 0 && g > most)
            most = g;
    fclose(fp);
    cr_assert_geq(most, 0, "%s is not in chunks.txt", file);
    return (size_t)most + 1;
}

Test(parquet, a_page_whose_size_disagrees_with_its_header_is_invalid_data)
{
    struct file f = slurp("snappy.parquet");
    long dict, data;
    chunk_offsets("snappy.parquet", "a", 0, &dict, &data);
    /* PageHeader: 0x15 type (i32 0: DATA_PAGE), 0x15 uncompressed_page_size as a zigzag varint: one more. */
    unsigned char *h = (unsigned char *)f.data + data;
    cr_assert(h[0] == 0x15 && h[1] == 0x00 && h[2] == 0x15, "not the page header the test expects");
    cr_assert((h[3] & 0x7f) < 0x7e);
    h[3] += 2;
    expect_invalid("size.parquet", &f,
                   (const char *const[]){"size.parquet: column a, row group 0:", "decompressed size", NULL});
    free(f.data);
}

Test(parquet, a_dictionary_index_out_of_range_is_invalid_data)
{
    struct file f = slurp("dict_uncompressed.parquet");
    long dict, data;
    chunk_offsets("dict_uncompressed.parquet", "k", 1, &dict, &data);
    cr_assert_geq(dict, 0);
    /* The dictionary page header's DictionaryPageHeader (field 7: 0x4c) starts with num_values 5 (0x15 0x0a):
       say 2, so the data page's indices 2, 3 and 4 point past it. */
    unsigned char *h = (unsigned char *)f.data + dict;
    unsigned char *at = memmem(h, (size_t)(data - dict), "\x4c\x15\x0a", 3);
    cr_assert_not_null(at, "not the dictionary page header the test expects");
    at[2] = 0x04;
    expect_invalid("dict.parquet", &f,
                   (const char *const[]){"dict.parquet: column k, row group 1:", "dictionary index out of range", NULL});
    free(f.data);
}

/* Every batch of a dataset over `url` (label column 2, f64, batches of 500, parse threads off). */
static double *all_batches(const char *url, enum dataset_format format, size_t *rows)
{
    struct dataset_config cfg = {.url = url, .format = format, .header = DATASET_HEADER_AUTO, .label_column = 2,
                                 .dtype = STORE_F64, .batch_size = 500, .parse_threads = -1};
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&cfg, &ds, &e), ERR_OK, "%s: %s", url, e.msg);
    cr_assert_eq(dataset_num_features(ds), NCOLS - 1);
    double *v = malloc(2200 * NCOLS * sizeof *v);
    *rows = 0;
    for (int b = 0; b < 5; b++) {
        size_t n;
        struct dataset_cursor at;
        cr_assert_eq(dataset_next_batch(ds, v + *rows * NCOLS, &n, &at, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(at.epoch, 0);
        *rows += n;
    }
    dataset_close(ds);
    return v;
}

Test(parquet, a_dataset_of_a_parquet_file_serves_the_csv_datasets_batches)
{
    size_t n_csv, n_pq, n_auto;
    double *csv = all_batches(DIR "values.csv", DATASET_FORMAT_CSV, &n_csv);
    double *pq = all_batches(DIR "zstd.parquet", DATASET_FORMAT_PARQUET, &n_pq);
    double *by_name = all_batches(DIR "gzip.parquet", DATASET_FORMAT_AUTO, &n_auto);
    cr_assert_eq(n_csv, 2200);
    cr_assert_eq(n_pq, n_csv);
    cr_assert_eq(n_auto, n_csv);
    cr_assert(memcmp(pq, csv, n_csv * NCOLS * sizeof *csv) == 0, "the Parquet dataset's rows differ from the CSV's");
    cr_assert(memcmp(by_name, csv, n_csv * NCOLS * sizeof *csv) == 0, "format auto did not read gzip.parquet");
    free(csv);
    free(pq);
    free(by_name);
}

Test(parquet, a_csv_read_as_parquet_is_invalid_data)
{
    struct dataset_config cfg = {.url = DIR "values.csv", .format = DATASET_FORMAT_PARQUET, .dtype = STORE_F64,
                                 .batch_size = 10, .parse_threads = -1};
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&cfg, &ds, &e), ERR_INVALID_DATA, "%s", e.msg);
    cr_assert(strstr(e.msg, "values.csv: not a Parquet file"), "%s", e.msg);
}

/* A damaged copy of exactly len bytes (so that a sanitizer sees any read past it) decodes or is invalid_data. */
static void decode_damaged(const char *name, const struct file *f, uint64_t *st, bool footer_only)
{
    char *copy = malloc(f->len);
    memcpy(copy, f->data, f->len);
    int flips = 1 + (int)(*st >> 60 & 3);
    for (int i = 0; i < flips; i++) {
        *st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t span = footer_only && f->len > 4096 ? 4096 : f->len;
        size_t at = f->len - 1 - (size_t)(*st >> 33) % span;
        copy[at] = (char)(*st >> 13);
    }
    struct file d = {copy, f->len};
    struct csv_format fmt = {.name = name, .dtype = STORE_F64};
    struct csv_layout lay;
    uint64_t rows = 0;
    struct err e = {0};
    int rc = parquet_measure(&fmt, d.data, d.len, &lay, &rows, &e);
    if (rc == ERR_OK && rows <= 2200 && lay.ncols == NCOLS) {
        double *dst = malloc((rows ? rows : 1) * NCOLS * sizeof *dst);
        fmt.ncols = lay.ncols;
        rc = parquet_parse_rows(&fmt, d.data, d.len, dst, rows, &e);
        free(dst);
    }
    cr_assert(rc == ERR_OK || rc == ERR_INVALID_DATA, "%s: code %d: %s", name, rc, e.msg);
    if (rc == ERR_INVALID_DATA)
        cr_assert(strncmp(e.msg, name, strlen(name)) == 0, "the message does not name the file: %s", e.msg);
    free(copy);
}

Test(parquet, random_damage_decodes_or_is_invalid_data_never_a_crash)
{
    static const char *const names[] = {"dict_uncompressed.parquet", "snappy.parquet", "gzip.parquet",
                                        "v2_zstd.parquet", "lz4_raw.parquet", "nulls.parquet", "required.parquet"};
    uint64_t st = 42;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        struct file f = slurp(names[k]);
        for (int i = 0; i < 300; i++)
            decode_damaged(names[k], &f, &st, i % 2 == 0);
        free(f.data);
    }
}

Test(parquet, a_spark_output_folder_reads_as_its_part_files)
{
    char *dir = tmp_make();
    struct file a = slurp("snappy.parquet"), b = slurp("dict_uncompressed.parquet");
    tmp_write_n(dir, "part-00000-1f.snappy.parquet", a.data, a.len);
    tmp_write_n(dir, "part-00001-1f.snappy.parquet", b.data, b.len);
    tmp_write(dir, "_SUCCESS", "");
    tmp_write(dir, ".part-00000-1f.snappy.parquet.crc", "crc, not Parquet");
    char *url = tmp_path(dir, ""); /* "dir/": every name in it */
    /* two parser threads: the second part file is decoded ahead while the first is served */
    struct dataset_config cfg = {.url = url, .dtype = STORE_F64, .batch_size = 4400, .parse_threads = 2};
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&cfg, &ds, &e), ERR_OK, "%s", e.msg);
    /* a partition a row group */
    size_t first = row_groups("snappy.parquet");
    cr_assert_eq(dataset_num_partitions(ds), first + row_groups("dict_uncompressed.parquet"));
    cr_assert_str_eq(dataset_partition_name(ds, 0), "part-00000-1f.snappy.parquet");
    cr_assert_str_eq(dataset_partition_name(ds, first), "part-00001-1f.snappy.parquet");
    uint64_t n_csv;
    double *want = csv_truth(&n_csv), *got = malloc(2 * n_csv * NCOLS * sizeof *got);
    size_t rows;
    cr_assert_eq(dataset_next_batch(ds, got, &rows, NULL, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(rows, 2 * n_csv);
    cr_assert(memcmp(got, want, n_csv * NCOLS * sizeof *got) == 0);
    cr_assert(memcmp(got + n_csv * NCOLS, want, n_csv * NCOLS * sizeof *got) == 0);
    dataset_close(ds);
    free(got);
    free(want);
    free(url);
    free(a.data);
    free(b.data);
    tmp_remove(dir);
}

/* A CSV with a header as the dataset would hold it in dtype dt: rows x cols values, its first column first. */
static void *csv_values(const char *name, uint64_t rows, size_t cols, enum store_dtype dt)
{
    struct file f = slurp(name);
    struct csv_format fmt = {.name = name, .header = DATASET_HEADER_YES, .dtype = dt};
    struct csv_layout lay;
    struct err e = {0};
    uint64_t n;
    cr_assert_eq(csv_probe(&fmt, f.data, f.len, &lay, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(csv_count_rows(&fmt, &lay, f.data, f.len, &n, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(n, rows);
    cr_assert_eq(lay.ncols, cols);
    void *v = malloc(rows * cols * 8);
    cr_assert_eq(csv_parse_rows(&fmt, &lay, f.data, f.len, v, rows, &e), ERR_OK, "%s", e.msg);
    free(f.data);
    return v;
}

/* The Parquet file decodes in dtype dt to the values of the CSV DuckDB wrote it from, bit for bit. */
static void check_against_csv(const char *parquet, const char *csv, uint64_t rows, size_t cols, enum store_dtype dt)
{
    size_t esz = dt == STORE_F32 ? 4 : 8;
    void *want = csv_values(csv, rows, cols, dt);
    struct file f = slurp(parquet);
    void *got = calloc(rows * cols, esz);
    uint64_t n;
    struct err e = {0};
    cr_assert_eq(decode(parquet, &f, dt, got, &n, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(n, rows);
    for (size_t i = 0; i < rows * cols; i++)
        cr_assert(memcmp((char *)got + i * esz, (char *)want + i * esz, esz) == 0,
                  "%s: %s row %zu, column %zu differs from the CSV's", parquet, esz == 4 ? "float32" : "float64",
                  i / cols, i % cols);
    free(got);
    free(want);
    free(f.data);
}

/* DECIMAL(9,2) on INT32, DECIMAL(18,6) on INT64, DATE (days), TIMESTAMP in ms, us, ns (seconds), DECIMAL(38,10)
   on 16 bytes. */
static void check_logical(enum store_dtype dt)
{
    check_against_csv("logical.parquet", "logical.csv", 500, 7, dt);
}

Test(parquet, decimals_dates_and_timestamps_are_the_csvs_decimals_rounded_once)
{
    check_logical(STORE_F64);
    check_logical(STORE_F32);
}

/* Every column a dictionary (repeats.csv: a few values each): INT32, INT64 (2^53 + 1 rounds), DECIMAL on INT32
   and INT64, DATE, TIMESTAMP. The dictionary is converted once, then gathered: each value still rounded once. */
Test(parquet, dictionary_encoded_integers_and_decimals_are_the_csvs_values_rounded_once)
{
    check_against_csv("repeats.parquet", "repeats.csv", 1500, 6, STORE_F64);
    check_against_csv("repeats.parquet", "repeats.csv", 1500, 6, STORE_F32);
}

/* Batches of one epoch of `url` with the label k and the features a, column 3 (c) and y, in that order. */
static double *chosen_columns(const char *url, size_t *rows, struct err *e)
{
    static const struct dataset_column features[] = {{"a", 0}, {NULL, 3}, {"y", 0}};
    struct dataset_config cfg = {.url = url, .label_name = "k", .features = features, .n_features = 3,
                                 .dtype = STORE_F64, .batch_size = 2200, .parse_threads = -1};
    struct dataset *ds;
    if (dataset_open(&cfg, &ds, e) != ERR_OK)
        return NULL;
    cr_assert_eq(dataset_num_features(ds), 3);
    cr_assert_eq(dataset_row_bytes(ds), 4 * sizeof(double));
    double *v = malloc(2200 * 4 * sizeof *v);
    cr_assert_eq(dataset_next_batch(ds, v, rows, NULL, e), ERR_OK, "%s", e->msg);
    dataset_close(ds);
    return v;
}

Test(parquet, label_and_features_chosen_by_name_or_index_come_in_the_asked_order)
{
    uint64_t n_csv;
    double *all = csv_truth(&n_csv); /* y a b c d e k */
    static const int from[] = {6, 1, 3, 0};
    struct err e = {0};
    size_t rows;
    const char *urls[] = {DIR "values.csv", DIR "snappy.parquet"};
    for (int u = 0; u < 2; u++) {
        double *got = chosen_columns(urls[u], &rows, &e);
        cr_assert_not_null(got, "%s: %s", urls[u], e.msg);
        cr_assert_eq(rows, n_csv);
        for (size_t r = 0; r < rows; r++)
            for (int j = 0; j < 4; j++)
                cr_assert(memcmp(&got[r * 4 + j], &all[r * NCOLS + from[j]], 8) == 0, "%s: row %zu, column %d",
                          urls[u], r, j);
        free(got);
    }
    free(all);
}

Test(parquet, a_column_name_that_is_not_there_or_twice_is_invalid_arg)
{
    struct err e = {0};
    static const struct dataset_column twice[] = {{"a", 0}, {NULL, 1}};
    static const struct dataset_column missing[] = {{"nope", 0}};
    struct dataset_config cfg = {.url = DIR "zstd.parquet", .features = missing, .n_features = 1,
                                 .dtype = STORE_F64, .batch_size = 10, .parse_threads = -1};
    struct dataset *ds;
    cr_assert_eq(dataset_open(&cfg, &ds, &e), ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "zstd.parquet: no feature column \"nope\""), "%s", e.msg);
    cfg.features = twice;
    cfg.n_features = 2;
    cr_assert_eq(dataset_open(&cfg, &ds, &e), ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "column 1 is chosen twice"), "%s", e.msg);
}

Test(parquet, a_decimal_beyond_64_bits_is_invalid_data_naming_its_column)
{
    struct file f = slurp("big_decimal.parquet");
    expect_invalid("big_decimal.parquet", &f,
                   (const char *const[]){"big_decimal.parquet: column big, row group 0:", "beyond 64 bits", NULL});
    free(f.data);
}

/* One epoch of zstd.parquet (label 0, the rest, or the chosen columns) through a parsed cache under cache. */
static void read_cached(const char *cache, const struct dataset_column *features, size_t n_features, double *dst,
                        struct dataset_stats *st)
{
    struct store_remote r = {.cache_dir = cache};
    struct dataset_config cfg = {.url = DIR "zstd.parquet", .remote = &r, .features = features,
                                 .n_features = n_features, .dtype = STORE_F64, .batch_size = 2200,
                                 .parse_threads = -1};
    struct dataset *ds;
    struct err e = {0};
    size_t rows;
    cr_assert_eq(dataset_open(&cfg, &ds, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(dataset_next_batch(ds, dst, &rows, NULL, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(rows, 2200);
    dataset_stats(ds, st);
    dataset_close(ds);
}

Test(parquet, decoded_partitions_are_kept_in_the_parsed_cache_by_their_columns)
{
    char *dir = tmp_make();
    char *cache = tmp_path(dir, "cache");
    static const struct dataset_column only_d[] = {{"d", 0}};
    double *first = malloc(2200 * NCOLS * sizeof *first), *again = malloc(2200 * NCOLS * sizeof *again);
    struct dataset_stats st;
    size_t groups = row_groups("zstd.parquet"); /* a partition each */
    read_cached(cache, NULL, 0, first, &st);
    cr_assert_eq(st.parsed, groups);
    read_cached(cache, NULL, 0, again, &st);
    cr_assert_eq(st.parsed, 0, "the second open decoded the file again");
    cr_assert_eq(st.cache_hits, groups);
    cr_assert(memcmp(first, again, 2200 * NCOLS * sizeof *first) == 0);
    read_cached(cache, only_d, 1, again, &st); /* other columns: other entries, not the first's rows */
    cr_assert_eq(st.parsed, groups);
    for (size_t r = 0; r < 2200; r++)
        cr_assert(memcmp(&again[2 * r], &first[r * NCOLS], 8) == 0 &&
                  memcmp(&again[2 * r + 1], &first[r * NCOLS + 4], 8) == 0, "row %zu", r);
    free(first);
    free(again);
    free(cache);
    tmp_remove(dir);
}

Test(parquet, a_partition_with_other_columns_than_the_first_is_invalid_data)
{
    char *dir = tmp_make();
    struct file a = slurp("snappy.parquet"), b = slurp("logical.parquet"); /* both 7 columns, other names */
    tmp_write_n(dir, "part-0.parquet", a.data, a.len);
    tmp_write_n(dir, "part-1.parquet", b.data, b.len);
    char *url = tmp_path(dir, "part-*.parquet");
    struct dataset_config cfg = {.url = url, .dtype = STORE_F64, .batch_size = 2200, .parse_threads = -1};
    struct dataset *ds;
    struct err e = {0};
    /* every footer is read at open, so the open says it */
    cr_assert_eq(dataset_open(&cfg, &ds, &e), ERR_INVALID_DATA, "%s", e.msg);
    cr_assert(strstr(e.msg, "part-1.parquet: its columns"), "%s", e.msg);
    free(url);
    free(a.data);
    free(b.data);
    tmp_remove(dir);
}

Test(parquet, a_csv_without_a_header_has_no_column_names)
{
    char *dir = tmp_make();
    tmp_write(dir, "plain.csv", "1,2,3\n4,5,6\n");
    char *url = tmp_path(dir, "plain.csv");
    struct dataset_config cfg = {.url = url, .label_name = "y", .dtype = STORE_F64, .batch_size = 2,
                                 .parse_threads = -1};
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&cfg, &ds, &e), ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "plain.csv: label column \"y\" by name, but the CSV has no header row"), "%s", e.msg);
    free(url);
    tmp_remove(dir);
}

Test(parquet, required_columns_from_a_second_writer_equal_their_csv)
{
    /* parquetjs-lite: y, b, c, e REQUIRED (no definition levels), a OPTIONAL; three row groups of 100, 100, 50 */
    struct file c = slurp("required.csv"), p = slurp("required.parquet");
    struct csv_format fmt = {.name = "required.csv", .header = DATASET_HEADER_YES, .dtype = STORE_F64};
    struct csv_layout lay;
    struct err e = {0};
    uint64_t rows, n;
    cr_assert_eq(csv_probe(&fmt, c.data, c.len, &lay, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(csv_count_rows(&fmt, &lay, c.data, c.len, &rows, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(rows, 250);
    double *want = malloc(rows * 5 * sizeof *want), *got = calloc(rows * 5, sizeof *got);
    cr_assert_eq(csv_parse_rows(&fmt, &lay, c.data, c.len, want, rows, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(decode("required.parquet", &p, STORE_F64, got, &n, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(n, rows);
    for (size_t i = 0; i < rows * 5; i++)
        cr_assert(memcmp(&got[i], &want[i], 8) == 0, "row %zu, column %zu: %.17g, the CSV says %.17g", i / 5, i % 5,
                  got[i], want[i]);
    free(want);
    free(got);
    free(c.data);
    free(p.data);
}
