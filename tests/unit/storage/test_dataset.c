/* test_dataset.c — batches over CSV partitions: layout, spanning, epochs, drop_last, seek, shards, bad CSV. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "tmpdir.h"

TMP_SUITE(storage);
static char url[4096];

static struct dataset_config config(const char *pattern, size_t batch, enum store_dtype dtype)
{
    snprintf(url, sizeof url, "%s/%s", dir, pattern);
    struct dataset_config c = {.url = url, .header = DATASET_HEADER_AUTO, .label_column = 0,
                               .dtype = dtype, .batch_size = batch};
    return c;
}

static struct dataset *open_ok(const struct dataset_config *c)
{
    struct dataset *ds = NULL;
    struct err e = {0};
    int rc = dataset_open(c, &ds, &e);
    cr_assert_eq(rc, ERR_OK, "dataset_open: %s", e.msg);
    return ds;
}

/* Opens (expecting success) and reads one batch, returning the code and message. */
static int first_batch_error(const struct dataset_config *c, struct err *e)
{
    struct dataset *ds = NULL;
    int rc = dataset_open(c, &ds, e);
    if (rc)
        return rc;
    double *buf = calloc(c->batch_size * 64, sizeof *buf);
    size_t rows;
    rc = dataset_next_batch(ds, buf, &rows, NULL, e);
    free(buf);
    dataset_close(ds);
    return rc;
}

static void assert_msg_has(const struct err *e, const char *what)
{
    cr_assert_not_null(strstr(e->msg, what), "message \"%s\" lacks \"%s\"", e->msg, what);
}

/*
 * Three partitions of 5, 7 and 4 rows, 4 columns, label in CSV column 2.
 * Global row g, CSV column c holds g*10 + c + 0.25 (exact in float and double).
 */
static void write_three_partitions(void)
{
    const int sizes[3] = {5, 7, 4};
    int g = 0;
    for (int p = 0; p < 3; p++) {
        char name[32], text[4096];
        size_t n = (size_t)snprintf(text, sizeof text, "a,b,fare,d\n");
        for (int r = 0; r < sizes[p]; r++, g++)
            n += (size_t)snprintf(text + n, sizeof text - n, "%d.25,%d.25,%d.25,%d.25\n", g * 10, g * 10 + 1,
                                  g * 10 + 2, g * 10 + 3);
        snprintf(name, sizeof name, "part-%05d.csv", p);
        tmp_write(dir, name, text);
    }
}

static double expected(int g, int out_col)
{
    static const int csv_col[4] = {2, 0, 1, 3}; /* the label first, then the rest in CSV order */
    return g * 10 + csv_col[out_col] + 0.25;
}

static void check_batch_f64(const double *b, size_t rows, int first_g)
{
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < 4; c++)
            cr_assert_eq(b[r * 4 + (size_t)c], expected(first_g + (int)r, c), "row %zu col %d", r, c);
}

static void check_batch_f32(const float *b, size_t rows, int first_g)
{
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < 4; c++)
            cr_assert_eq(b[r * 4 + (size_t)c], (float)expected(first_g + (int)r, c), "row %zu col %d", r, c);
}

Test(storage, batches_span_partitions_f64)
{
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 6, STORE_F64);
    c.label_column = 2;
    struct dataset *ds = open_ok(&c);
    cr_assert_eq(dataset_num_partitions(ds), 3);
    cr_assert_eq(dataset_num_features(ds), 3);
    cr_assert_eq(dataset_batch_bytes(ds), 6 * 4 * sizeof(double));
    double b[6 * 4];
    const size_t want_rows[5] = {6, 6, 4, 6, 6};
    const int want_g[5] = {0, 6, 12, 0, 6};
    const struct dataset_cursor want_at[5] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}};
    for (int i = 0; i < 5; i++) {
        size_t rows;
        struct dataset_cursor at;
        struct err e = {0};
        cr_assert_eq(dataset_next_batch(ds, b, &rows, &at, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(rows, want_rows[i], "batch %d", i);
        cr_assert_eq(at.epoch, want_at[i].epoch, "batch %d", i);
        cr_assert_eq(at.batch, want_at[i].batch, "batch %d", i);
        check_batch_f64(b, rows, want_g[i]);
    }
    dataset_close(ds);
}

Test(storage, batches_span_partitions_f32)
{
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 6, STORE_F32);
    c.label_column = 2;
    struct dataset *ds = open_ok(&c);
    float b[6 * 4];
    const size_t want_rows[4] = {6, 6, 4, 6};
    const int want_g[4] = {0, 6, 12, 0};
    for (int i = 0; i < 4; i++) {
        size_t rows;
        struct err e = {0};
        cr_assert_eq(dataset_next_batch(ds, b, &rows, NULL, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(rows, want_rows[i]);
        check_batch_f32(b, rows, want_g[i]);
    }
    dataset_close(ds);
}

Test(storage, drop_last_skips_the_short_tail)
{
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 6, STORE_F64);
    c.label_column = 2;
    c.drop_last = true;
    struct dataset *ds = open_ok(&c);
    double b[6 * 4];
    const struct dataset_cursor want_at[5] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}};
    for (int i = 0; i < 5; i++) {
        size_t rows;
        struct dataset_cursor at;
        struct err e = {0};
        cr_assert_eq(dataset_next_batch(ds, b, &rows, &at, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(rows, 6);
        cr_assert_eq(at.epoch, want_at[i].epoch, "batch %d", i);
        cr_assert_eq(at.batch, want_at[i].batch, "batch %d", i);
        check_batch_f64(b, rows, i % 2 ? 6 : 0);
    }
    dataset_close(ds);
}

Test(storage, drop_last_with_fewer_rows_than_a_batch_fails)
{
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 100, STORE_F64);
    c.drop_last = true;
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_ARG, "%s", e.msg);
}

Test(storage, batch_larger_than_the_data_returns_one_short_batch_per_epoch)
{
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 100, STORE_F64);
    c.label_column = 2;
    struct dataset *ds = open_ok(&c);
    double *b = calloc(100 * 4, sizeof *b);
    for (int i = 0; i < 3; i++) {
        size_t rows;
        struct dataset_cursor at;
        struct err e = {0};
        cr_assert_eq(dataset_next_batch(ds, b, &rows, &at, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(rows, 16);
        cr_assert_eq(at.epoch, (uint64_t)i);
        cr_assert_eq(at.batch, 0);
        check_batch_f64(b, rows, 0);
    }
    free(b);
    dataset_close(ds);
}

/* Partitions of the given sizes, 2 columns: global row g holds (g, -g); label column 0. */

Test(storage, every_row_once_per_epoch_in_order_for_many_partition_and_batch_sizes)
{
    uint64_t rng = 99;
    for (int trial = 0; trial < 20; trial++) {
        int sizes[9], n = 1 + (int)(rng % 9);
        for (int p = 0; p < n; p++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            sizes[p] = 1 + (int)((rng >> 33) % 20);
        }
        char sub[32];
        snprintf(sub, sizeof sub, "t%d", trial);
        tmp_mkdir(dir, sub);
        char *saved = dir;
        dir = tmp_path(saved, sub);
        int total = tmp_write_partitions(dir, sizes, n);
        size_t bs = 1 + (size_t)((rng >> 40) % 30);
        struct dataset_config c = config("part-*.csv", bs, STORE_F64);
        c.resident_limit = trial % 3 == 0 ? 1 : trial % 3 == 1 ? 10 * 2 * sizeof(double) : 0;
        struct dataset *ds = open_ok(&c);
        double *b = malloc(bs * 2 * sizeof *b);
        int g = 0;
        uint64_t epoch = 0, batch = 0;
        while (epoch < 3) {
            size_t rows;
            struct dataset_cursor at;
            struct err e = {0};
            cr_assert_eq(dataset_next_batch(ds, b, &rows, &at, &e), ERR_OK, "%s", e.msg);
            cr_assert_eq(at.epoch, epoch, "trial %d", trial);
            cr_assert_eq(at.batch, batch, "trial %d", trial);
            for (size_t r = 0; r < rows; r++, g++) {
                cr_assert_eq(b[2 * r], g, "trial %d epoch %llu row %d", trial, (unsigned long long)epoch, g);
                cr_assert_eq(b[2 * r + 1], -g);
            }
            cr_assert(rows == bs || g == total, "trial %d: short batch before the epoch end", trial);
            batch++;
            if (g == total) {
                g = 0;
                epoch++;
                batch = 0;
            }
        }
        free(b);
        dataset_close(ds);
        free(dir);
        dir = saved;
    }
}

Test(storage, seek_to_every_cursor_matches_sequential_reading)
{
    const int sizes[5] = {3, 11, 1, 8, 5};
    tmp_write_partitions(dir, sizes, 5);
    for (int drop = 0; drop < 2; drop++) {
        struct dataset_config c = config("part-*.csv", 4, STORE_F32);
        c.drop_last = drop;
        struct dataset *seq = open_ok(&c), *jump = open_ok(&c);
        float a[8], b[8];
        for (int i = 0; i < 20; i++) {
            size_t ra, rb;
            struct dataset_cursor at, at2;
            struct err e = {0};
            cr_assert_eq(dataset_next_batch(seq, a, &ra, &at, &e), ERR_OK, "%s", e.msg);
            cr_assert_eq(dataset_seek(jump, &at, &e), ERR_OK, "%s", e.msg);
            cr_assert_eq(dataset_next_batch(jump, b, &rb, &at2, &e), ERR_OK, "%s", e.msg);
            cr_assert_eq(ra, rb);
            cr_assert_eq(at.epoch, at2.epoch);
            cr_assert_eq(at.batch, at2.batch);
            cr_assert_arr_eq(a, b, ra * 2 * sizeof(float), "drop_last %d, call %d", drop, i);
        }
        dataset_close(seq);
        dataset_close(jump);
    }
}

/* Reads n batches sequentially and returns a copy of the last one. */
static double *read_nth(struct dataset_config *c, int n, size_t *rows, struct dataset_cursor *at)
{
    struct dataset *ds = open_ok(c);
    double *b = calloc(c->batch_size * 4, sizeof *b);
    for (int i = 0; i < n; i++) {
        struct err e = {0};
        cr_assert_eq(dataset_next_batch(ds, b, rows, at, &e), ERR_OK, "%s", e.msg);
    }
    dataset_close(ds);
    return b;
}

Test(storage, seek_returns_what_sequential_reading_returns)
{
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 5, STORE_F64);
    c.label_column = 2;
    size_t want_rows;
    struct dataset_cursor want_at;
    /* epoch 0 has batches of 5,5,5,1: (1, 2) is the 7th call */
    double *want = read_nth(&c, 7, &want_rows, &want_at);
    cr_assert_eq(want_at.epoch, 1);
    cr_assert_eq(want_at.batch, 2);

    struct dataset *ds = open_ok(&c);
    struct err e = {0};
    struct dataset_cursor to = {1, 2}, at;
    cr_assert_eq(dataset_seek(ds, &to, &e), ERR_OK, "%s", e.msg);
    double got[5 * 4];
    size_t rows;
    cr_assert_eq(dataset_next_batch(ds, got, &rows, &at, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(rows, want_rows);
    cr_assert_eq(at.epoch, 1);
    cr_assert_eq(at.batch, 2);
    cr_assert_arr_eq(got, want, rows * 4 * sizeof(double));
    free(want);
    dataset_close(ds);
}

Test(storage, seek_with_shard_counts_does_not_read_earlier_partitions)
{
    write_three_partitions();
    tmp_write(dir, "shards.csv", "id,count\n0,5\n1,7\n2,4\n");
    char shards[4200];
    snprintf(shards, sizeof shards, "%s/shards.csv", dir);
    struct dataset_config c = config("part-*.csv", 6, STORE_F64);
    c.label_column = 2;
    c.shards_url = shards;
    struct dataset *ds = open_ok(&c);
    /* Earlier partitions gone: the seek must compute its way to row 12 (partition 2, row 0). */
    char *p0 = tmp_path(dir, "part-00000.csv"), *p1 = tmp_path(dir, "part-00001.csv");
    cr_assert_eq(unlink(p0), 0);
    cr_assert_eq(unlink(p1), 0);
    free(p0);
    free(p1);
    struct err e = {0};
    struct dataset_cursor to = {3, 2}, at;
    cr_assert_eq(dataset_seek(ds, &to, &e), ERR_OK, "%s", e.msg);
    double b[6 * 4];
    size_t rows;
    cr_assert_eq(dataset_next_batch(ds, b, &rows, &at, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(rows, 4);
    cr_assert_eq(at.epoch, 3);
    cr_assert_eq(at.batch, 2);
    check_batch_f64(b, rows, 12);
    dataset_close(ds);
}

Test(storage, seek_onto_a_tail_that_drop_last_drops_fails)
{
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 6, STORE_F64);
    c.drop_last = true;
    struct dataset *ds = open_ok(&c);
    struct err e = {0};
    struct dataset_cursor to = {0, 2};
    cr_assert_eq(dataset_seek(ds, &to, &e), ERR_INVALID_ARG);
    struct dataset_cursor ok = {0, 1};
    cr_assert_eq(dataset_seek(ds, &ok, &e), ERR_OK, "%s", e.msg);
    dataset_close(ds);
}

Test(storage, tell_reports_the_next_batch)
{
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 6, STORE_F64);
    struct dataset *ds = open_ok(&c);
    double b[6 * 4];
    size_t rows;
    struct err e = {0};
    struct dataset_cursor t;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(dataset_next_batch(ds, b, &rows, NULL, &e), ERR_OK, "%s", e.msg);
    dataset_tell(ds, &t);
    cr_assert_eq(t.epoch, 1);
    cr_assert_eq(t.batch, 0);
    dataset_close(ds);
}

Test(storage, tell_after_the_last_full_batch_with_drop_last_is_the_next_epoch)
{
    /* a checkpoint taken here must hold a cursor that seek accepts */
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 6, STORE_F64);
    c.drop_last = true;
    struct dataset *ds = open_ok(&c);
    double b[6 * 4];
    size_t rows;
    struct err e = {0};
    struct dataset_cursor t;
    for (int i = 0; i < 2; i++)
        cr_assert_eq(dataset_next_batch(ds, b, &rows, NULL, &e), ERR_OK, "%s", e.msg);
    dataset_tell(ds, &t);
    cr_assert_eq(t.epoch, 1);
    cr_assert_eq(t.batch, 0);
    cr_assert_eq(dataset_seek(ds, &t, &e), ERR_OK, "%s", e.msg);
    dataset_close(ds);
}

Test(storage, seek_past_the_end_of_an_epoch_fails)
{
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 5, STORE_F64);
    struct dataset *ds = open_ok(&c);
    struct err e = {0};
    struct dataset_cursor to = {0, 4};
    cr_assert_eq(dataset_seek(ds, &to, &e), ERR_INVALID_ARG);
    dataset_close(ds);
}

Test(storage, resident_data_serves_later_epochs_and_a_tiny_limit_rereads_the_same)
{
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 6, STORE_F64);
    c.label_column = 2;
    struct dataset *kept = open_ok(&c);
    c.resident_limit = 1;
    struct dataset *reread = open_ok(&c);
    double a[6 * 4], b[6 * 4];
    for (int i = 0; i < 7; i++) {
        size_t ra, rb;
        struct err e = {0};
        cr_assert_eq(dataset_next_batch(kept, a, &ra, NULL, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(dataset_next_batch(reread, b, &rb, NULL, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(ra, rb);
        cr_assert_arr_eq(a, b, ra * 4 * sizeof(double), "batch %d", i);
    }
    cr_assert_eq(dataset_resident_bytes(kept), 16 * 4 * sizeof(double));
    cr_assert_eq(dataset_resident_bytes(reread), 0);
    dataset_close(kept);
    dataset_close(reread);
}

Test(storage, shards_metadata_gives_row_counts_before_reading)
{
    write_three_partitions();
    tmp_mkdir(dir, ".meta");
    tmp_mkdir(dir, ".meta/shards");
    tmp_write(dir, ".meta/shards/a.csv", "id,count\n2,4\n0,5\n");
    tmp_write(dir, ".meta/shards/b.csv", "id,count\n1,7\n");
    char shards[4200];
    snprintf(shards, sizeof shards, "%s/.meta/shards/*.csv", dir);
    struct dataset_config c = config("part-*.csv", 6, STORE_F64);
    c.shards_url = shards;
    struct dataset *ds = open_ok(&c);
    cr_assert_eq(dataset_num_rows(ds), 16);
    cr_assert_eq(dataset_partition_rows(ds, 0), 5);
    cr_assert_eq(dataset_partition_rows(ds, 1), 7);
    cr_assert_eq(dataset_partition_rows(ds, 2), 4);
    dataset_close(ds);
}

Test(storage, row_counts_are_unknown_until_read_without_shards)
{
    write_three_partitions();
    struct dataset_config c = config("part-*.csv", 16, STORE_F64);
    struct dataset *ds = open_ok(&c);
    cr_assert_eq(dataset_num_rows(ds), 0);
    cr_assert_eq(dataset_partition_rows(ds, 2), 0);
    double b[16 * 4];
    size_t rows;
    struct err e = {0};
    cr_assert_eq(dataset_next_batch(ds, b, &rows, NULL, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(dataset_num_rows(ds), 16);
    dataset_close(ds);
}

Test(storage, shards_count_that_disagrees_with_the_file_is_invalid_data)
{
    write_three_partitions();
    tmp_mkdir(dir, "meta");
    tmp_write(dir, "meta/s.csv", "id,count\n0,5\n1,7\n2,9\n");
    char shards[4200];
    snprintf(shards, sizeof shards, "%s/meta/*.csv", dir);
    struct dataset_config c = config("part-*.csv", 16, STORE_F64);
    c.shards_url = shards;
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
    assert_msg_has(&e, "part-00002.csv: 4 rows, but shards metadata says 9");
}

Test(storage, shards_counts_too_small_or_absurdly_large_are_invalid_data)
{
    /* read without a counting pass when the metadata gives the count: the parse itself must notice */
    const char *counts[2] = {"id,count\n0,5\n1,7\n2,3\n", "id,count\n0,5\n1,7\n2,900000000000\n"};
    const char *want[2] = {"part-00002.csv: 4 rows, but shards metadata says 3",
                           "part-00002.csv: 4 rows, but shards metadata says 900000000000"};
    write_three_partitions();
    for (int i = 0; i < 2; i++) {
        tmp_write(dir, "s.csv", counts[i]);
        char shards[4200];
        snprintf(shards, sizeof shards, "%s/s.csv", dir);
        struct dataset_config c = config("part-*.csv", 16, STORE_F64);
        c.shards_url = shards;
        struct err e = {0};
        cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
        assert_msg_has(&e, want[i]);
    }
}

Test(storage, shard_ids_join_spark_style_partition_names)
{
    tmp_write(dir, "part-00077-1b2c-c000.csv", "1,2\n3,4\n5,6\n");
    tmp_write(dir, "part-00078-1b2c-c000.csv", "1,2\n");
    tmp_write(dir, "shards.csv", "id,count\n78,1\n77,3\n");
    char shards[4200];
    snprintf(shards, sizeof shards, "file://%s/shards.csv", dir);
    struct dataset_config c = config("part-*.csv", 2, STORE_F64);
    c.shards_url = shards;
    struct dataset *ds = open_ok(&c);
    cr_assert_eq(dataset_partition_rows(ds, 0), 3);
    cr_assert_eq(dataset_partition_rows(ds, 1), 1);
    dataset_close(ds);
}

Test(storage, shards_giving_one_id_two_counts_are_invalid_data)
{
    write_three_partitions();
    tmp_write(dir, "s1.csv", "id,count\n0,5\n");
    tmp_write(dir, "s2.csv", "id,count\n0,6\n");
    char shards[4200];
    snprintf(shards, sizeof shards, "%s/s?.csv", dir);
    struct dataset_config c = config("part-*.csv", 6, STORE_F64);
    c.shards_url = shards;
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
}

Test(storage, shards_without_id_and_count_header_are_invalid_data)
{
    write_three_partitions();
    tmp_write(dir, "s.csv", "0,5\n");
    char shards[4200];
    snprintf(shards, sizeof shards, "%s/s.csv", dir);
    struct dataset_config c = config("part-*.csv", 6, STORE_F64);
    c.shards_url = shards;
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
    assert_msg_has(&e, "s.csv");
}

/* Opens one file with the given header mode and returns the first batch (up to 8 rows of 3 columns). */
static size_t read_one(const char *text, enum dataset_header h, int label, double *out)
{
    tmp_write(dir, "one.csv", text);
    struct dataset_config c = config("one.csv", 8, STORE_F64);
    c.header = h;
    c.label_column = label;
    struct dataset *ds = open_ok(&c);
    size_t rows;
    struct err e = {0};
    cr_assert_eq(dataset_next_batch(ds, out, &rows, NULL, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(dataset_num_features(ds), 2);
    dataset_close(ds);
    return rows;
}

Test(storage, header_auto_skips_a_text_first_row)
{
    double b[24];
    cr_assert_eq(read_one("fare,lat,lon\n1,2,3\n4,5,6\n", DATASET_HEADER_AUTO, 0, b), 2);
    cr_assert_eq(b[0], 1);
    cr_assert_eq(b[5], 6);
}

Test(storage, header_auto_keeps_a_numeric_first_row)
{
    double b[24];
    cr_assert_eq(read_one("1,2,3\n4,5,6\n", DATASET_HEADER_AUTO, 0, b), 2);
    cr_assert_eq(b[0], 1);
}

Test(storage, header_yes_skips_even_a_numeric_first_row)
{
    double b[24];
    cr_assert_eq(read_one("1,2,3\n4,5,6\n", DATASET_HEADER_YES, 0, b), 1);
    cr_assert_eq(b[0], 4);
}

Test(storage, header_no_reports_a_text_first_row_as_not_a_number)
{
    tmp_write(dir, "one.csv", "fare,lat,lon\n1,2,3\n");
    struct dataset_config c = config("one.csv", 8, STORE_F64);
    c.header = DATASET_HEADER_NO;
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
    assert_msg_has(&e, "line 1, column 1: not a number");
}

Test(storage, crlf_line_endings_are_accepted)
{
    double b[24];
    cr_assert_eq(read_one("a,b,c\r\n1,2,3\r\n4,5,6\r\n", DATASET_HEADER_AUTO, 0, b), 2);
    cr_assert_eq(b[2], 3);
    cr_assert_eq(b[5], 6);
}

Test(storage, missing_final_newline_is_accepted)
{
    double b[24];
    cr_assert_eq(read_one("1,2,3\n4,5,6", DATASET_HEADER_AUTO, 0, b), 2);
    cr_assert_eq(b[5], 6);
}

Test(storage, empty_lines_are_skipped)
{
    double b[24];
    cr_assert_eq(read_one("\n1,2,3\n\n4,5,6\n\n\r\n", DATASET_HEADER_AUTO, 0, b), 2);
    cr_assert_eq(b[3], 4);
}

Test(storage, spaces_around_fields_are_ignored)
{
    double b[24];
    cr_assert_eq(read_one(" 1 ,\t2, 3\n4 ,5 , -6 \n", DATASET_HEADER_AUTO, 0, b), 2);
    cr_assert_eq(b[1], 2);
    cr_assert_eq(b[5], -6);
}

Test(storage, utf8_byte_order_mark_is_skipped)
{
    double b[24];
    cr_assert_eq(read_one("\xEF\xBB\xBF" "1,2,3\n4,5,6\n", DATASET_HEADER_NO, 0, b), 2);
    cr_assert_eq(b[0], 1);
}

Test(storage, label_column_is_moved_to_column_zero)
{
    double b[24];
    cr_assert_eq(read_one("1,2,3\n4,5,6\n", DATASET_HEADER_AUTO, 2, b), 2);
    const double want[6] = {3, 1, 2, 6, 4, 5};
    cr_assert_arr_eq(b, want, sizeof want);
}

Test(storage, label_column_out_of_range_is_invalid_arg)
{
    tmp_write(dir, "one.csv", "1,2,3\n");
    struct dataset_config c = config("one.csv", 8, STORE_F64);
    c.label_column = 3;
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_ARG, "%s", e.msg);
}

Test(storage, non_numeric_field_names_file_line_and_column_not_content)
{
    char text[1024];
    size_t n = (size_t)snprintf(text, sizeof text, "a,b,c,d\n");
    for (int line = 2; line <= 20; line++)
        n += (size_t)snprintf(text + n, sizeof text - n, line == 17 ? "1,2,secret,4\n" : "1,2,3,4\n");
    tmp_write(dir, "bad.csv", text);
    struct dataset_config c = config("bad.csv", 64, STORE_F64);
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
    assert_msg_has(&e, "bad.csv: line 17, column 3: not a number");
    cr_assert_null(strstr(e.msg, "secret"), "message echoes the field: %s", e.msg);
}

Test(storage, trailing_garbage_after_a_number_is_not_a_number)
{
    tmp_write(dir, "bad.csv", "1,2\n3,4x\n");
    struct dataset_config c = config("bad.csv", 8, STORE_F32);
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
    assert_msg_has(&e, "bad.csv: line 2, column 2: not a number");
}

Test(storage, nan_and_inf_text_are_not_numbers)
{
    tmp_write(dir, "bad.csv", "1,2\n3,nan\n");
    struct dataset_config c = config("bad.csv", 8, STORE_F64);
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
    assert_msg_has(&e, "line 2, column 2: not a number");
}

Test(storage, ragged_row_names_file_line_and_field_counts)
{
    char text[1024];
    size_t n = 0;
    for (int line = 1; line <= 12; line++)
        n += (size_t)snprintf(text + n, sizeof text - n, line == 9 ? "1,2,3,4,5,6,7\n" : "1,2,3,4,5,6,7,8,9\n");
    tmp_write(dir, "ragged.csv", text);
    struct dataset_config c = config("ragged.csv", 64, STORE_F64);
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
    assert_msg_has(&e, "ragged.csv: line 9, column 8: 7 fields, expected 9");
}

Test(storage, row_with_too_many_fields_is_ragged)
{
    tmp_write(dir, "ragged.csv", "1,2\n3,4,5\n");
    struct dataset_config c = config("ragged.csv", 8, STORE_F64);
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
    assert_msg_has(&e, "ragged.csv: line 2, column 3: 3 fields, expected 2");
}

Test(storage, empty_file_is_invalid_data)
{
    tmp_write(dir, "empty.csv", "");
    struct dataset_config c = config("empty.csv", 8, STORE_F64);
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
    assert_msg_has(&e, "empty.csv: line 1, column 1: empty file");
}

/* An empty partition among others contributes no rows: test_empty_parts.c. */

Test(storage, header_only_file_is_invalid_data)
{
    tmp_write(dir, "head.csv", "fare,lat,lon\n");
    struct dataset_config c = config("head.csv", 8, STORE_F64);
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
    assert_msg_has(&e, "head.csv: line 2, column 1: header but no rows");
}

Test(storage, partitions_with_different_column_counts_are_invalid_data)
{
    tmp_write(dir, "part-0.csv", "a,b,c\n1,2,3\n");
    tmp_write(dir, "part-1.csv", "a,b\n1,2\n");
    struct dataset_config c = config("part-*.csv", 8, STORE_F64);
    struct err e = {0};
    cr_assert_eq(first_batch_error(&c, &e), ERR_INVALID_DATA, "%s", e.msg);
    assert_msg_has(&e, "part-1.csv: line 1");
    assert_msg_has(&e, "2 fields, expected 3");
}
