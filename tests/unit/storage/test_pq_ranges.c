/*
 * test_pq_ranges.c — a Parquet dataset over s3:// (s3rver), http(s):// (fail.js) and file:// reads
 * the footer and then only its selected columns' chunks, a row group at a time: groups.parquet
 * (9 DOUBLE columns in two row groups, written by DuckDB: tests/fixtures/parquet/make_groups_fixture.js)
 * with 2 columns chosen gives the rows a whole-file decode gives, and fetches under 35% of its bytes.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csv.h"
#include "dataset.h"
#include "parquet.h"
#include "store.h"
#include "test_servers.h"

#define FIXTURE FIXTURES_DIR "/parquet/groups.parquet"
#define ROWS 2500   /* DuckDB wrote them as row groups of 2048 and 452 */
#define BATCH 300

static struct test_server srv;
static char *file_bytes;
static size_t file_len;

static void slurp_fixture(void)
{
    if (file_bytes)
        return;
    FILE *fp = fopen(FIXTURE, "rb");
    cr_assert_not_null(fp, "cannot open %s", FIXTURE);
    cr_assert_eq(fseek(fp, 0, SEEK_END), 0);
    file_len = (size_t)ftell(fp);
    rewind(fp);
    file_bytes = malloc(file_len);
    cr_assert_not_null(file_bytes);
    cr_assert_eq(fread(file_bytes, 1, file_len, fp), file_len);
    fclose(fp);
}

static void start_s3(void)
{
    cr_assert(test_server_tmpdir(&srv));
    slurp_fixture();
    static char dir[512], put[1024];
    snprintf(dir, sizeof dir, "%s/s3", srv.tmp);
    snprintf(put, sizeof put, "bk/pq/groups.parquet=%s", FIXTURE);
    const char *args[] = {"--dir", dir, "--bucket", "bk", "--put", put, NULL};
    TEST_SERVER_START_OR_SKIP(&srv, "s3.js", args);
    test_s3_credentials();
}

static void start_http(void)
{
    cr_assert(test_server_tmpdir(&srv));
    slurp_fixture();
    cr_assert(test_server_write(&srv, "pq/groups.parquet", file_bytes, file_len));
    const char *args[] = {"--root", srv.tmp, NULL};
    TEST_SERVER_START_OR_SKIP(&srv, "fail.js", args);
}

static void teardown(void)
{
    test_server_stop(&srv);
    free(file_bytes);
    file_bytes = NULL;
}

TestSuite(pq_ranges, .fini = teardown);

/* The truth: the whole file decoded at once (parquet_parse_rows), columns y and x0 (0 and 1). */
static double *whole_file_rows(void)
{
    static const size_t cols[] = {0, 1};
    struct csv_format f = {.name = "groups.parquet", .format = DATASET_FORMAT_PARQUET, .dtype = STORE_F64,
                           .label = 0, .ncols = 9, .cols = cols, .n_cols = 2};
    double *v = malloc(ROWS * 2 * sizeof *v);
    struct err e = {0};
    cr_assert_eq(parquet_parse_rows(&f, file_bytes, file_len, v, ROWS, &e), ERR_OK, "%s", e.msg);
    return v;
}

/* One epoch of y and x0 (label and one feature by name) in `parts` partitions, its stats in *st. */
static double *read_epoch_of(const char *url, const struct store_remote *r, size_t parts, struct dataset_stats *st)
{
    static const struct dataset_column x0[] = {{"x0", 0}};
    struct dataset_config c = {.url = url, .remote = r, .label_name = "y", .features = x0, .n_features = 1,
                               .dtype = STORE_F64, .batch_size = BATCH, .parse_threads = 1};
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(dataset_num_partitions(ds), parts);
    cr_assert_eq(dataset_num_rows(ds), ROWS, "row counts come from the footer");
    double *v = malloc(ROWS * 2 * sizeof *v);
    size_t got = 0;
    while (got < ROWS) {
        size_t rows;
        struct dataset_cursor at;
        cr_assert_eq(dataset_next_batch(ds, v + got * 2, &rows, &at, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(at.epoch, 0);
        got += rows;
    }
    dataset_stats(ds, st);
    dataset_close(ds);
    return v;
}

static double *read_epoch(const char *url, const struct store_remote *r, struct dataset_stats *st)
{
    return read_epoch_of(url, r, 2, st); /* a partition a row group */
}

static void assert_two_columns_read_by_range(const char *url, const struct store_remote *r)
{
    struct dataset_stats st;
    double *want = whole_file_rows(), *got = read_epoch(url, r, &st);
    cr_assert(memcmp(got, want, ROWS * 2 * sizeof *got) == 0, "%s: rows differ from the whole-file decode", url);
    cr_log_info("%s: %llu of %zu bytes fetched", url, (unsigned long long)st.bytes_fetched, file_len);
    cr_assert_eq(st.bytes_total, file_len);
    cr_assert_gt(st.bytes_fetched, 0);
    cr_assert_lt(st.bytes_fetched * 100, file_len * 35, "%s: %llu bytes of %zu fetched for 2 of 9 columns", url,
                 (unsigned long long)st.bytes_fetched, file_len);
    free(want);
    free(got);
}

Test(pq_ranges, two_of_nine_columns_over_s3_fetch_under_35_percent_and_equal_the_whole_file)
{
    start_s3();
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", srv.port);
    struct store_remote r = {.s3_endpoint = endpoint, .s3_region = "us-east-1"};
    assert_two_columns_read_by_range("s3://bk/pq/groups.parquet", &r);
}

Test(pq_ranges, two_of_nine_columns_over_http_ranges_fetch_under_35_percent)
{
    start_http();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ranges/pq/groups.parquet", srv.port);
    assert_two_columns_read_by_range(url, NULL);
}

Test(pq_ranges, two_of_nine_columns_over_file_read_under_35_percent)
{
    slurp_fixture();
    assert_two_columns_read_by_range("file://" FIXTURE, NULL);
}

Test(pq_ranges, a_server_without_ranges_gives_one_partition_a_file_read_whole_with_the_same_rows)
{
    start_http();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/pq/groups.parquet", srv.port);
    struct dataset_stats st;
    double *want = whole_file_rows(), *got = read_epoch_of(url, NULL, 1, &st);
    cr_assert(memcmp(got, want, ROWS * 2 * sizeof *got) == 0);
    /* once for the footer, once for the rows: not once a row group */
    cr_assert_eq(st.bytes_fetched, 2 * file_len);
    free(want);
    free(got);
}

Test(pq_ranges, a_second_open_through_the_cache_reads_the_footer_from_it)
{
    start_s3();
    char endpoint[64], cache[600];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", srv.port);
    snprintf(cache, sizeof cache, "%s/cache", srv.tmp);
    struct store_remote r = {.s3_endpoint = endpoint, .s3_region = "us-east-1", .cache_dir = cache};
    struct dataset_config c = {.url = "s3://bk/pq/groups.parquet", .remote = &r, .dtype = STORE_F64,
                               .batch_size = BATCH, .parse_threads = -1};
    struct dataset_stats st;
    for (int run = 0; run < 2; run++) {
        struct dataset *ds;
        struct err e = {0};
        cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "%s", e.msg);
        dataset_stats(ds, &st);
        if (run == 0)
            cr_assert_gt(st.bytes_fetched, 0, "the first open fetches the footer");
        else
            cr_assert_eq(st.bytes_fetched, 0, "the second open fetched %llu bytes",
                         (unsigned long long)st.bytes_fetched);
        dataset_close(ds);
    }
}

Test(pq_ranges, a_truncated_object_is_invalid_data_naming_it)
{
    start_http();
    cr_assert(test_server_write(&srv, "pq/short.parquet", file_bytes, file_len / 2));
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ranges/pq/short.parquet", srv.port);
    struct dataset_config c = {.url = url, .dtype = STORE_F64, .batch_size = BATCH, .parse_threads = -1};
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_INVALID_DATA, "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, "short.parquet: not a Parquet file"), "%s", e.msg);
}

/* ---- what a row group's read asks for, against DuckDB's account of the chunks (groups_chunks.txt) ---- */

struct chunk_ref {
    long start, size; /* the dictionary page's offset if any, else the first data page's; compressed bytes */
};

static struct chunk_ref chunk_ref(int group, const char *column)
{
    FILE *fp = fopen(FIXTURES_DIR "/parquet/groups_chunks.txt", "r");
    cr_assert_not_null(fp);
    int g;
    long rows, dict, data, size;
    char col[32];
    while (fscanf(fp, "%d %ld %31s %ld %ld %ld", &g, &rows, col, &dict, &data, &size) == 6)
        if (g == group && strcmp(col, column) == 0) {
            fclose(fp);
            return (struct chunk_ref){dict >= 0 ? dict : data, size};
        }
    fclose(fp);
    cr_assert_fail("row group %d, column %s is not in groups_chunks.txt", group, column);
    return (struct chunk_ref){0};
}

/* A reader over the file in memory that notes every read. */
struct reads {
    uint64_t off[16], len[16];
    size_t n;
};

static int note_read(void *arg, uint64_t off, size_t len, void *dst, struct err *e)
{
    struct reads *r = arg;
    cr_assert_lt(r->n, 16);
    cr_assert_leq(off + len, file_len);
    r->off[r->n] = off;
    r->len[r->n++] = len;
    memcpy(dst, file_bytes + off, len);
    (void)e;
    return ERR_OK;
}

/* Reads row group `group`'s columns cols (y is 0, x0 1, ... x7 8) as a dataset would; the reads in *r. */
static void read_group(int group, const size_t *cols, size_t n, struct reads *r)
{
    slurp_fixture();
    struct parquet_footer *f;
    struct err e = {0};
    struct reads footer = {0};
    cr_assert_eq(parquet_footer_fetch("groups.parquet", file_len, note_read, &footer, &f, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(footer.n, 1, "one read brings a small footer");
    cr_assert_eq(footer.off[0] + footer.len[0], file_len, "the footer read is the file's end");
    cr_assert_eq(parquet_footer_groups(f), 2);
    struct csv_format fm = {.name = "groups.parquet", .format = DATASET_FORMAT_PARQUET, .dtype = STORE_F64,
                            .label = cols[0], .ncols = 9, .cols = cols, .n_cols = n};
    uint64_t rows = parquet_footer_group_rows(f, (size_t)group);
    cr_assert_eq(rows, group == 0 ? 2048 : 452);
    double *dst = malloc(rows * n * sizeof *dst);
    *r = (struct reads){0};
    cr_assert_eq(parquet_parse_group(&fm, f, (size_t)group, note_read, r, dst, rows, &e), ERR_OK, "%s", e.msg);
    free(dst);
    parquet_footer_free(f);
}

Test(pq_ranges, a_row_group_of_two_adjacent_columns_is_one_read_of_exactly_their_chunks)
{
    static const size_t cols[] = {0, 1};
    for (int g = 0; g < 2; g++) {
        struct reads r;
        read_group(g, cols, 2, &r);
        struct chunk_ref y = chunk_ref(g, "y"), x0 = chunk_ref(g, "x0");
        cr_assert_eq(r.n, 1, "row group %d: %zu reads", g, r.n);
        cr_assert_eq(r.off[0], (uint64_t)y.start);
        cr_assert_eq(r.len[0], (uint64_t)(x0.start + x0.size - y.start));
    }
}

Test(pq_ranges, chunks_less_than_a_mebibyte_apart_are_read_as_one_span_with_the_gap)
{
    static const size_t cols[] = {8, 0}; /* x7 as the label, y as the feature: any order reads in file order */
    struct reads r;
    read_group(1, cols, 2, &r);
    struct chunk_ref y = chunk_ref(1, "y"), x7 = chunk_ref(1, "x7");
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.off[0], (uint64_t)y.start);
    cr_assert_eq(r.len[0], (uint64_t)(x7.start + x7.size - y.start));
}

Test(pq_ranges, a_damaged_page_in_a_ranged_read_is_invalid_data_naming_file_column_and_row_group)
{
    slurp_fixture();
    struct chunk_ref x0 = chunk_ref(1, "x0");
    char dir[] = "/tmp/traind-pqr-XXXXXX", path[64], url[80];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/bad.parquet", dir);
    file_bytes[x0.start] = (char)0xff; /* the page header's first field header: no Thrift type */
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    cr_assert_eq(fwrite(file_bytes, 1, file_len, fp), file_len);
    fclose(fp);
    snprintf(url, sizeof url, "file://%s", path);
    static const struct dataset_column x0_col[] = {{"x0", 0}};
    struct dataset_config c = {.url = url, .label_name = "y", .features = x0_col, .n_features = 1,
                               .dtype = STORE_F64, .batch_size = 2500, .parse_threads = -1};
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "%s", e.msg);
    double *dst = malloc(2500 * 2 * sizeof *dst);
    size_t rows;
    int rc = dataset_next_batch(ds, dst, &rows, NULL, &e);
    dataset_close(ds);
    free(dst);
    unlink(path);
    rmdir(dir);
    cr_assert_eq(rc, ERR_INVALID_DATA, "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, "bad.parquet: column x0, row group 1:"), "%s", e.msg);
}

Test(pq_ranges, a_replica_whose_shares_lie_in_one_row_group_reads_that_group_alone)
{
    slurp_fixture();
    static const struct dataset_column x0[] = {{"x0", 0}};
    /* one batch of 2500 rows an epoch: rank 0 of 2 takes rows 0..1249, all in row group 0 (2048 rows) */
    struct dataset_config c = {.url = "file://" FIXTURE, .label_name = "y", .features = x0, .n_features = 1,
                               .dtype = STORE_F64, .batch_size = ROWS, .share_rank = 0, .share_n = 2,
                               .parse_threads = 1};
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "%s", e.msg);
    double *got = calloc(ROWS * 2, sizeof *got), *want = whole_file_rows();
    size_t rows;
    for (int epoch = 0; epoch < 2; epoch++) {
        cr_assert_eq(dataset_next_batch(ds, got, &rows, NULL, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(rows, ROWS);
        cr_assert(memcmp(got, want, ROWS / 2 * 2 * sizeof *got) == 0, "epoch %d: rank 0's rows differ", epoch);
    }
    struct dataset_stats st;
    dataset_stats(ds, &st);
    cr_assert_eq(st.parsed, 1, "%llu row groups decoded", (unsigned long long)st.parsed);
    dataset_close(ds);
    struct dataset_stats whole;
    free(read_epoch("file://" FIXTURE, NULL, &whole));
    struct chunk_ref y1 = chunk_ref(1, "y"), x01 = chunk_ref(1, "x0");
    cr_assert_eq(st.bytes_fetched, whole.bytes_fetched - (uint64_t)(x01.start + x01.size - y1.start),
                 "not the whole read less row group 1's chunks");
    free(got);
    free(want);
}
