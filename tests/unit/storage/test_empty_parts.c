/* test_empty_parts.c — partitions without data rows (no bytes, blank lines, a header alone, kaen's count 0) are skipped. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "store.h"
#include "tmpdir.h"

TMP_SUITE(empty_parts);
static char url[4096], shards[4200];

/* What a partition holds: rows, or one of the ways of holding none. */
enum { NO_BYTES = -1, HEADER_ONLY = -2, BLANK_LINES = -3 };

/*
 * Partitions part-00000.csv ... with a header "y,x" (but NO_BYTES and BLANK_LINES,
 * which have none); data row g is "g,g+0.5", g counting on across partitions.
 * Returns the number of data rows.
 */
static int write_parts(const int *kinds, int n)
{
    int g = 0;
    for (int p = 0; p < n; p++) {
        char name[32], text[8192];
        size_t len = 0;
        text[0] = '\0';
        if (kinds[p] == BLANK_LINES)
            len = (size_t)snprintf(text, sizeof text, "\n\r\n\n");
        else if (kinds[p] != NO_BYTES)
            len = (size_t)snprintf(text, sizeof text, "y,x\n");
        for (int r = 0; r < kinds[p]; r++, g++)
            len += (size_t)snprintf(text + len, sizeof text - len, "%d,%d.5\n", g, g);
        snprintf(name, sizeof name, "part-%05d.csv", p);
        tmp_write(dir, name, text);
    }
    return g;
}

/* kaen's .meta/shards file: id,count for every partition (empty ones 0). */
static void write_shards(const int *kinds, int n)
{
    char text[4096];
    size_t len = (size_t)snprintf(text, sizeof text, "id,count\n");
    for (int p = 0; p < n; p++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%d,%d\n", p, kinds[p] > 0 ? kinds[p] : 0);
    tmp_mkdir(dir, "meta");
    tmp_write(dir, "meta/shards.csv", text);
    snprintf(shards, sizeof shards, "%s/meta/*.csv", dir);
}

static struct dataset_config config(size_t batch)
{
    snprintf(url, sizeof url, "%s/part-*.csv", dir);
    struct dataset_config c = {.url = url, .header = DATASET_HEADER_AUTO, .label_column = 0, .dtype = STORE_F64,
                               .batch_size = batch};
    return c;
}

static struct dataset *open_ok(const struct dataset_config *c)
{
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(c, &ds, &e), ERR_OK, "dataset_open: %s", e.msg);
    return ds;
}

/*
 * Reads epoch `epoch` to its end, asserting that no batch is empty, that batches
 * are numbered 0, 1, ... and that the cursor moves to the next epoch exactly after
 * the last one. The labels, in the order served, go to labels (room for `cap`).
 * Returns the number of rows; the number of batches in *batches.
 */
static int read_epoch(struct dataset *ds, uint64_t epoch, size_t batch, double *labels, int cap, int *batches)
{
    double *b = malloc(batch * 2 * sizeof *b);
    cr_assert_not_null(b);
    int n = 0;
    *batches = 0;
    struct dataset_cursor at, next;
    do {
        size_t rows;
        struct err e = {0};
        cr_assert_eq(dataset_next_batch(ds, b, &rows, &at, &e), ERR_OK, "%s", e.msg);
        cr_assert_gt(rows, 0, "epoch %llu batch %d has no rows", (unsigned long long)epoch, *batches);
        cr_assert_eq(at.epoch, epoch, "batch %d is of epoch %llu", *batches, (unsigned long long)at.epoch);
        cr_assert_eq(at.batch, (uint64_t)*batches);
        for (size_t r = 0; r < rows; r++) {
            cr_assert_lt(n, cap, "more rows than the data has");
            cr_assert_eq(b[r * 2 + 1], b[r * 2] + 0.5, "row %zu: a label and its feature", r);
            labels[n++] = b[r * 2];
        }
        ++*batches;
        dataset_tell(ds, &next);
        cr_assert(next.epoch == epoch || (next.epoch == epoch + 1 && next.batch == 0),
                  "after batch %d: cursor {%llu, %llu}", *batches, (unsigned long long)next.epoch,
                  (unsigned long long)next.batch);
    } while (next.epoch == epoch);
    free(b);
    return n;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every row 0 .. total-1 once, in stream order when `in_order`. */
static void assert_every_row_once(double *labels, int n, int total, bool in_order)
{
    cr_assert_eq(n, total, "%d rows served, the data has %d", n, total);
    if (!in_order)
        qsort(labels, (size_t)n, sizeof *labels, by_value);
    for (int g = 0; g < total; g++)
        cr_assert_eq(labels[g], (double)g, "row %d is %g", g, labels[g]);
}

/* Reads two epochs and checks each: every row once, ceil(rows / batch) batches. */
static void check_epochs(struct dataset *ds, int total, size_t batch, bool in_order)
{
    double labels[256];
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        int batches;
        int n = read_epoch(ds, epoch, batch, labels, 256, &batches);
        assert_every_row_once(labels, n, total, in_order);
        cr_assert_eq(batches, (total + (int)batch - 1) / (int)batch, "epoch %llu", (unsigned long long)epoch);
    }
}

Test(empty_parts, an_empty_last_partition_ends_the_epoch_with_the_last_batch_of_data)
{
    const int kinds[] = {5, 7, NO_BYTES};
    int total = write_parts(kinds, 3);
    struct dataset_config c = config(4);   /* 12 rows: three full batches, then nothing */
    struct dataset *ds = open_ok(&c);
    check_epochs(ds, total, 4, true);
    dataset_close(ds);
}

Test(empty_parts, a_header_only_last_partition_ends_the_epoch_with_the_last_batch_of_data)
{
    const int kinds[] = {5, 7, HEADER_ONLY};
    int total = write_parts(kinds, 3);
    struct dataset_config c = config(5);   /* 12 rows: 5, 5 and a short 2 */
    struct dataset *ds = open_ok(&c);
    check_epochs(ds, total, 5, true);
    dataset_close(ds);
}

Test(empty_parts, empty_partitions_first_in_the_middle_and_several_in_a_row_are_skipped)
{
    const int kinds[] = {NO_BYTES, 5, HEADER_ONLY, BLANK_LINES, 7, NO_BYTES, 4, HEADER_ONLY, HEADER_ONLY};
    int total = write_parts(kinds, 9);
    for (int threads = -1; threads <= 2; threads += 3) {
        for (size_t batch = 1; batch <= 17; batch++) {
            struct dataset_config c = config(batch);
            c.parse_threads = threads;
            struct dataset *ds = open_ok(&c);
            check_epochs(ds, total, batch, true);
            dataset_close(ds);
        }
    }
}

Test(empty_parts, with_a_parsed_cache_later_opens_skip_empty_partitions_the_same)
{
    const int kinds[] = {HEADER_ONLY, 5, NO_BYTES, 7, HEADER_ONLY};
    int total = write_parts(kinds, 5);
    tmp_mkdir(dir, "cache");
    char *cache = tmp_path(dir, "cache");
    struct store_remote r = {.cache_dir = cache};
    for (int open = 0; open < 2; open++) {   /* parsed and written, then mapped */
        struct dataset_config c = config(5);
        c.remote = &r;
        struct dataset *ds = open_ok(&c);
        check_epochs(ds, total, 5, true);
        struct dataset_stats st;
        dataset_stats(ds, &st);
        if (open == 1)
            cr_assert_eq(st.cache_hits, 2, "the two partitions with rows come from the cache");
        dataset_close(ds);
    }
    free(cache);
}

Test(empty_parts, the_rows_of_an_epoch_do_not_count_empty_partitions)
{
    const int kinds[] = {5, HEADER_ONLY, 7, NO_BYTES};
    write_parts(kinds, 4);
    struct dataset_config c = config(6);
    struct dataset *ds = open_ok(&c);
    double labels[64];
    int batches;
    read_epoch(ds, 0, 6, labels, 64, &batches);
    cr_assert_eq(dataset_num_rows(ds), 12, "ceil(rows / batch) iterations an epoch must not count them");
    cr_assert_eq(dataset_partition_rows(ds, 1), 0);
    cr_assert_eq(dataset_partition_rows(ds, 3), 0);
    dataset_close(ds);
}

Test(empty_parts, with_drop_last_the_epoch_ends_after_the_last_full_batch)
{
    const int kinds[] = {5, NO_BYTES, 7, 4, HEADER_ONLY};
    write_parts(kinds, 5);
    struct dataset_config c = config(6);   /* 16 rows: two batches of 6, a tail of 4 dropped */
    c.drop_last = true;
    struct dataset *ds = open_ok(&c);
    double labels[64];
    for (uint64_t epoch = 0; epoch < 3; epoch++) {
        int batches;
        int n = read_epoch(ds, epoch, 6, labels, 64, &batches);
        cr_assert_eq(batches, 2);
        cr_assert_eq(n, 12);
    }
    dataset_close(ds);
}

Test(empty_parts, shards_counts_of_zero_make_the_row_counts_known_at_open)
{
    const int kinds[] = {5, NO_BYTES, 7, HEADER_ONLY};
    int total = write_parts(kinds, 4);
    write_shards(kinds, 4);
    struct dataset_config c = config(4);
    c.shards_url = shards;
    struct dataset *ds = open_ok(&c);
    cr_assert_eq(dataset_num_rows(ds), 12);
    check_epochs(ds, total, 4, true);
    dataset_close(ds);
}

Test(empty_parts, a_partition_with_a_shards_count_of_zero_is_not_read)
{
    const int kinds[] = {5, 0, 7};
    write_parts(kinds, 3);
    tmp_write(dir, "part-00001.csv", "y,x\nnot,numbers\n"); /* what kaen's count of 0 says to skip */
    write_shards(kinds, 3);
    struct dataset_config c = config(4);
    c.shards_url = shards;
    struct dataset *ds = open_ok(&c);
    check_epochs(ds, 12, 4, true);
    dataset_close(ds);
}

Test(empty_parts, shuffled_partitions_with_empty_ones_serve_every_row_once_an_epoch)
{
    const int kinds[] = {HEADER_ONLY, 5, NO_BYTES, 7, HEADER_ONLY, HEADER_ONLY, 4, 9, NO_BYTES};
    int total = write_parts(kinds, 9);
    for (uint64_t seed = 0; seed < 8; seed++) {
        struct dataset_config c = config(4);
        c.shuffle_partitions = true;
        c.seed = seed;
        struct dataset *ds = open_ok(&c);
        check_epochs(ds, total, 4, false);
        dataset_close(ds);
    }
}

Test(empty_parts, a_shuffle_buffer_over_empty_partitions_serves_every_row_once_an_epoch)
{
    const int kinds[] = {5, NO_BYTES, HEADER_ONLY, 7, BLANK_LINES, 4, HEADER_ONLY};
    int total = write_parts(kinds, 7);
    for (size_t buffer = 1; buffer <= 20; buffer += 3) {
        struct dataset_config c = config(3);
        c.shuffle_partitions = true;
        c.shuffle_buffer = buffer;
        c.seed = buffer;
        struct dataset *ds = open_ok(&c);
        check_epochs(ds, total, 3, false);
        dataset_close(ds);
    }
}

Test(empty_parts, seek_over_empty_partitions_equals_reading_on)
{
    const int kinds[] = {NO_BYTES, 5, HEADER_ONLY, 7, NO_BYTES, 4, HEADER_ONLY};
    write_parts(kinds, 7);
    for (size_t buffer = 0; buffer <= 5; buffer += 5) {
        struct dataset_config c = config(3);
        c.shuffle_partitions = buffer != 0;
        c.shuffle_buffer = buffer;
        struct dataset *seq = open_ok(&c);
        double want[3 * 2], got[3 * 2];
        for (int k = 0; k < 6; k++) {   /* epoch 0 and the first batch of epoch 1 */
            size_t want_rows, got_rows;
            struct dataset_cursor at;
            struct err e = {0};
            cr_assert_eq(dataset_next_batch(seq, want, &want_rows, &at, &e), ERR_OK, "%s", e.msg);
            struct dataset *jump = open_ok(&c);
            cr_assert_eq(dataset_seek(jump, &at, &e), ERR_OK, "seek to {%llu, %llu}: %s",
                         (unsigned long long)at.epoch, (unsigned long long)at.batch, e.msg);
            cr_assert_eq(dataset_next_batch(jump, got, &got_rows, NULL, &e), ERR_OK, "%s", e.msg);
            cr_assert_eq(got_rows, want_rows);
            cr_assert_arr_eq(got, want, got_rows * 2 * sizeof(double), "batch {%llu, %llu}",
                             (unsigned long long)at.epoch, (unsigned long long)at.batch);
            dataset_close(jump);
        }
        dataset_close(seq);
    }
}

Test(empty_parts, a_dataset_whose_partitions_are_all_empty_is_invalid_data_naming_the_url)
{
    const int kinds[] = {NO_BYTES, HEADER_ONLY, BLANK_LINES};
    write_parts(kinds, 3);
    struct dataset_config c = config(4);
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_INVALID_DATA, "%s", e.msg);
    cr_assert_null(ds);
    cr_assert_not_null(strstr(e.msg, url), "message \"%s\" does not name %s", e.msg, url);
}

Test(empty_parts, all_shards_counts_of_zero_are_invalid_data_naming_the_url)
{
    const int kinds[] = {0, 0};
    write_parts(kinds, 2);
    write_shards(kinds, 2);
    struct dataset_config c = config(4);
    c.shards_url = shards;
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_INVALID_DATA, "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, url), "message \"%s\" does not name %s", e.msg, url);
}

Test(empty_parts, a_header_only_partition_among_headerless_ones_is_invalid_data)
{
    tmp_write(dir, "part-00000.csv", "1,1.5\n2,2.5\n");
    tmp_write(dir, "part-00001.csv", "y,x\n");   /* the first partition said: no header */
    struct dataset_config c = config(4);
    struct dataset *ds = open_ok(&c);
    double b[4 * 2];
    size_t rows;
    struct err e = {0};
    cr_assert_eq(dataset_next_batch(ds, b, &rows, NULL, &e), ERR_INVALID_DATA, "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, "part-00001.csv: line 1, column 1: not a number"), "%s", e.msg);
    dataset_close(ds);
}
