/* test_parallel.c — partitions parsed ahead on worker threads: same batches as one thread, errors in their turn. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "tmpdir.h"

TMP_SUITE(storage);
static char url[4096];

/* n partitions of rows_each rows, 3 columns: global row g holds (g, -g, g / 8). */
static int write_partitions(int n, int rows_each)
{
    int g = 0;
    for (int p = 0; p < n; p++) {
        char name[32];
        char *text = malloc(64 * (size_t)rows_each + 1);
        size_t len = 0;
        for (int r = 0; r < rows_each + p % 3; r++, g++)
            len += (size_t)sprintf(text + len, "%d,%d,%.3f\n", g, -g, g / 8.0);
        snprintf(name, sizeof name, "part-%05d.csv", p);
        tmp_write_n(dir, name, text, len);
        free(text);
    }
    return g;
}

static struct dataset *open_ds(int threads, size_t batch, size_t resident_limit, bool shuffle)
{
    snprintf(url, sizeof url, "%s/part-*.csv", dir);
    struct dataset_config c = {.url = url, .header = DATASET_HEADER_NO, .dtype = STORE_F32, .batch_size = batch,
                               .resident_limit = resident_limit, .parse_threads = threads, .seed = 5,
                               .shuffle_partitions = shuffle, .shuffle_buffer = shuffle ? 100 : 0};
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "dataset_open: %s", e.msg);
    return ds;
}

Test(storage, parallel_parsing_gives_the_batches_of_one_thread)
{
    int total = write_partitions(12, 300);
    for (int variant = 0; variant < 4; variant++) {
        size_t limit = variant & 1 ? 1 : 0; /* 1 byte: nothing resident, every epoch parses again */
        bool shuffle = variant & 2;
        struct dataset *one = open_ds(-1, 128, limit, shuffle), *many = open_ds(3, 128, limit, shuffle);
        float a[128 * 3], b[128 * 3];
        int batches = 3 * (total / 128 + 1);
        for (int i = 0; i < batches; i++) {
            size_t ra, rb;
            struct dataset_cursor ca, cb;
            struct err e = {0};
            cr_assert_eq(dataset_next_batch(one, a, &ra, &ca, &e), ERR_OK, "%s", e.msg);
            cr_assert_eq(dataset_next_batch(many, b, &rb, &cb, &e), ERR_OK, "%s", e.msg);
            cr_assert_eq(ra, rb, "variant %d batch %d", variant, i);
            cr_assert_eq(ca.epoch, cb.epoch);
            cr_assert_eq(ca.batch, cb.batch);
            cr_assert_arr_eq(a, b, ra * 3 * sizeof(float), "variant %d batch %d", variant, i);
        }
        dataset_close(one);
        dataset_close(many);
    }
}

Test(storage, an_error_in_a_partition_parsed_ahead_comes_when_it_is_reached)
{
    write_partitions(4, 50); /* 50, 51, 52, 50 rows */
    tmp_write(dir, "part-00004.csv", "1,2,3\n4,5\n");
    tmp_write(dir, "part-00005.csv", "1,2,3\n");
    struct dataset *ds = open_ds(3, 10, 0, false);
    float b[10 * 3];
    size_t rows;
    struct err e = {0};
    for (int i = 0; i < 20; i++) /* 203 rows: twenty full batches need no row of part 4 */
        cr_assert_eq(dataset_next_batch(ds, b, &rows, NULL, &e), ERR_OK, "batch %d: %s", i, e.msg);
    cr_assert_eq(dataset_next_batch(ds, b, &rows, NULL, &e), ERR_INVALID_DATA);
    cr_assert_not_null(strstr(e.msg, "part-00004.csv: line 2, column 3: 2 fields, expected 3"), "%s", e.msg);
    dataset_close(ds);
}

Test(storage, closing_while_workers_parse_ahead_is_clean)
{
    write_partitions(16, 2000);
    for (int i = 0; i < 5; i++) {
        struct dataset *ds = open_ds(4, 100, 1, i % 2);
        float b[100 * 3];
        size_t rows;
        struct err e = {0};
        cr_assert_eq(dataset_next_batch(ds, b, &rows, NULL, &e), ERR_OK, "%s", e.msg);
        dataset_close(ds); /* workers are mid-partition: they finish, are joined, their rows freed */
    }
}
