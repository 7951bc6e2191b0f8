/* test_views.c — batches as views of an unshuffled dataset in one buffer (dataset_next_view): what they hold, when. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "prefetch.h"
#include "store.h"
#include "tmpdir.h"

TMP_SUITE(views);
static char url[4096];

static struct dataset *open_with(struct dataset_config c)
{
    snprintf(url, sizeof url, "%s/part-*.csv", dir);
    c.url = url;
    c.header = DATASET_HEADER_NO;
    c.dtype = STORE_F64;
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "dataset_open: %s", e.msg);
    return ds;
}

/* The next batch as a view when there is one, else copied into buf; *viewed says which. */
static const double *next(struct dataset *ds, double *buf, size_t *rows, struct dataset_cursor *at, bool *viewed)
{
    struct err e = {0};
    const void *v = NULL;
    cr_assert_eq(dataset_next_view(ds, &v, rows, at, &e), ERR_OK, "dataset_next_view: %s", e.msg);
    *viewed = v != NULL;
    if (v)
        return v;
    cr_assert_eq(dataset_next_batch(ds, buf, rows, at, &e), ERR_OK, "dataset_next_batch: %s", e.msg);
    return buf;
}

/* Reads `epochs` epochs through next(): every row once per epoch, in order, cursors as dataset_next_batch
 * counts them. With expect_views, a batch is a view exactly when every partition's row count was known
 * before it was asked for, and always from the second epoch on; without, never. */
static void read_epochs(struct dataset *ds, int total, size_t batch, bool drop_last, int epochs, bool expect_views,
                        const char *what)
{
    double *buf = malloc(batch * 2 * sizeof *buf);
    int g = 0;
    uint64_t epoch = 0, b = 0;
    while (epoch < (uint64_t)epochs) {
        size_t rows;
        struct dataset_cursor at;
        bool viewed, counted = dataset_num_rows(ds) != 0;
        const double *v = next(ds, buf, &rows, &at, &viewed);
        cr_assert_eq(at.epoch, epoch, "%s: epoch", what);
        cr_assert_eq(at.batch, b, "%s: batch %llu of epoch %llu", what, (unsigned long long)b,
                     (unsigned long long)epoch);
        cr_assert_eq(viewed, expect_views && counted, "%s: epoch %llu batch %llu %s with counts %s", what,
                     (unsigned long long)epoch, (unsigned long long)b, viewed ? "viewed" : "copied",
                     counted ? "known" : "not all known");
        cr_assert(viewed || !expect_views || epoch == 0, "%s: epoch %llu batch %llu copied", what,
                  (unsigned long long)epoch, (unsigned long long)b);
        for (size_t r = 0; r < rows; r++, g++) {
            cr_assert_eq(v[2 * r], g, "%s: epoch %llu row %d", what, (unsigned long long)epoch, g);
            cr_assert_eq(v[2 * r + 1], -g, "%s: epoch %llu row %d", what, (unsigned long long)epoch, g);
        }
        b++;
        if (g == total || (drop_last && total - g < (int)batch)) {
            g = 0;
            epoch++;
            b = 0;
        }
    }
    free(buf);
}

Test(views, once_every_count_is_known_batches_are_views_of_every_row_in_order)
{
    const int sizes[] = {5, 0, 37, 1, 64, 0, 13};
    int total = tmp_write_partitions(dir, sizes, 7);
    const size_t batches[] = {1, 7, 16, 120, 200};
    for (int i = 0; i < 5; i++)
        for (int drop = 0; drop < 2; drop++) {
            if (drop && batches[i] > (size_t)total)
                continue;
            struct dataset *ds = open_with((struct dataset_config){.batch_size = batches[i], .drop_last = drop});
            char what[64];
            snprintf(what, sizeof what, "batch %zu%s", batches[i], drop ? ", drop_last" : "");
            read_epochs(ds, total, batches[i], drop, 4, true, what);
            dataset_close(ds);
        }
}

/* Reads n batches of a dataset opened with c: none may be a view. */
static void expect_never_viewed(struct dataset_config c, int n, const char *what)
{
    struct dataset *ds = open_with(c);
    double *buf = malloc(c.batch_size * 2 * sizeof *buf);
    for (int i = 0; i < n; i++) {
        size_t rows;
        struct dataset_cursor at;
        bool viewed;
        next(ds, buf, &rows, &at, &viewed);
        cr_assert(!viewed, "batch %d of a dataset with %s was a view", i, what);
    }
    free(buf);
    dataset_close(ds);
}

Test(views, shuffled_datasets_are_always_copied)
{
    const int sizes[] = {20, 30, 10};
    int batches = 3 * tmp_write_partitions(dir, sizes, 3) / 8;
    expect_never_viewed((struct dataset_config){.batch_size = 8, .shuffle_buffer = 16, .seed = 5}, batches,
                        "a shuffle buffer");
    expect_never_viewed((struct dataset_config){.batch_size = 8, .shuffle_partitions = true, .seed = 5}, batches,
                        "shuffled partitions");
}

Test(views, without_room_for_a_second_copy_batches_stay_copies)
{
    const int sizes[] = {20, 30, 10};
    int total = tmp_write_partitions(dir, sizes, 3);
    size_t bytes = (size_t)total * 2 * sizeof(double);
    struct dataset *ds = open_with((struct dataset_config){.batch_size = 8, .resident_limit = bytes});
    read_epochs(ds, total, 8, false, 3, false, "limit of one copy");
    cr_expect_eq(dataset_resident_bytes(ds), bytes, "every partition stays resident all the same");
    dataset_close(ds);
    ds = open_with((struct dataset_config){.batch_size = 8, .resident_limit = 2 * bytes});
    read_epochs(ds, total, 8, false, 3, true, "limit of two copies");
    cr_expect_eq(dataset_resident_bytes(ds), bytes, "one copy stays once the rows are in one buffer");
    dataset_close(ds);
}

Test(views, after_a_seek_views_start_once_every_partition_is_counted)
{
    const int sizes[] = {9, 14, 6};
    tmp_write_partitions(dir, sizes, 3);
    struct dataset *ds = open_with((struct dataset_config){.batch_size = 4});
    struct err e = {0};
    struct dataset_cursor c = {2, 3};
    cr_assert_eq(dataset_seek(ds, &c, &e), ERR_OK, "%s", e.msg);
    double buf[8];
    int g = 12, views = 0;
    for (uint64_t epoch = 2; epoch < 5; epoch++)
        for (uint64_t b = epoch == 2 ? 3 : 0; b < 8; b++) {
            size_t rows;
            struct dataset_cursor at;
            bool viewed, counted = dataset_num_rows(ds) != 0;
            const double *v = next(ds, buf, &rows, &at, &viewed);
            cr_assert(at.epoch == epoch && at.batch == b, "at %llu/%llu, not %llu/%llu",
                      (unsigned long long)at.epoch, (unsigned long long)at.batch, (unsigned long long)epoch,
                      (unsigned long long)b);
            cr_assert_eq(viewed, counted, "epoch %llu batch %llu", (unsigned long long)epoch, (unsigned long long)b);
            views += viewed;
            for (size_t r = 0; r < rows; r++, g++)
                cr_assert_eq(v[2 * r], g, "epoch %llu row %d", (unsigned long long)epoch, g);
            if (g == 29)
                g = 0;
        }
    /* The seek counted partitions 0 and 1; batch 5 of epoch 2 read partition 2, so batch 6 on are views. */
    cr_expect_eq(views, 2 + 8 + 8, "views from epoch 2 batch 6 on");
    dataset_close(ds);
}

/* kaen's shards metadata for tmp_write_partitions' files: dir/shards.csv; its path goes to url_out. */
static void write_shards(const int *sizes, int n, char *url_out, size_t cap)
{
    char text[1024] = "id,count\n";
    for (int i = 0; i < n; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%d,%d\n", i, sizes[i]);
    tmp_write(dir, "shards.csv", text);
    snprintf(url_out, cap, "%s/shards.csv", dir);
}

Test(views, with_shards_metadata_every_batch_is_a_view_from_the_first)
{
    const int sizes[] = {5, 0, 37, 1, 64, 0, 13};
    int total = tmp_write_partitions(dir, sizes, 7);
    char shards[4200];
    write_shards(sizes, 7, shards, sizeof shards);
    const size_t batches[] = {1, 7, 16, 120, 200};
    for (int i = 0; i < 5; i++)
        for (int threads = -1; threads <= 2; threads += 3) { /* on the reader alone, and parsed ahead */
            struct dataset *ds = open_with((struct dataset_config){
                .batch_size = batches[i], .shards_url = shards, .parse_threads = threads});
            char what[64];
            snprintf(what, sizeof what, "batch %zu, %d parse threads", batches[i], threads);
            cr_assert_neq(dataset_num_rows(ds), 0, "%s: counts known at open", what);
            read_epochs(ds, total, batches[i], false, 3, true, what);
            cr_expect_eq(dataset_resident_bytes(ds), (size_t)total * 2 * sizeof(double), "%s: one copy", what);
            dataset_close(ds);
        }
}

Test(views, rows_mapped_from_the_parsed_cache_are_placed_and_the_cache_stays_usable)
{
    const int sizes[] = {40, 25, 0, 70};
    int total = tmp_write_partitions(dir, sizes, 4);
    char shards[4200], cache[4200];
    write_shards(sizes, 4, shards, sizeof shards);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    struct store_remote remote = {.cache_dir = cache};
    for (int run = 0; run < 3; run++) { /* the first parses and writes the cache; the others map it */
        struct dataset *ds = open_with((struct dataset_config){.batch_size = 32, .shards_url = shards,
                                                               .remote = &remote});
        char what[32];
        snprintf(what, sizeof what, "run %d", run);
        read_epochs(ds, total, 32, false, 2, true, what);
        struct dataset_stats st;
        dataset_stats(ds, &st);
        cr_expect_eq(st.parsed, run == 0 ? 3 : 0, "%s: partitions parsed", what);
        cr_expect_eq(st.cache_hits, run == 0 ? 0 : 3, "%s: partitions mapped from the cache", what);
        dataset_close(ds);
    }
}

Test(views, prefetched_views_match_copied_batches_and_go_back_to_the_ring)
{
    const int sizes[] = {33, 0, 17, 50};
    tmp_write_partitions(dir, sizes, 4);
    struct dataset *direct = open_with((struct dataset_config){.batch_size = 16}),
                   *fed = open_with((struct dataset_config){.batch_size = 16});
    struct prefetch_config cfg = {.slots = 3, .views = true};
    struct prefetch *pf = NULL;
    struct err e = {0};
    cr_assert_eq(prefetch_start(fed, &cfg, &pf, &e), ERR_OK, "%s", e.msg);
    double want[16 * 2];
    for (int i = 0; i < 40; i++) {
        size_t rows;
        struct dataset_cursor at, after;
        cr_assert_eq(dataset_next_batch(direct, want, &rows, &at, &e), ERR_OK, "%s", e.msg);
        dataset_tell(direct, &after);
        struct prefetch_slot s;
        cr_assert_eq(prefetch_next(pf, 10.0, &s, &e), ERR_OK, "%s", e.msg);
        cr_assert_not_null(s.data, "batch %d: timed out", i);
        cr_assert(s.rows == rows && s.cursor.epoch == at.epoch && s.cursor.batch == at.batch &&
                  s.next.epoch == after.epoch && s.next.batch == after.batch, "batch %d", i);
        cr_assert_arr_eq(s.data, want, rows * 2 * sizeof(double), "batch %d", i);
        prefetch_release(pf, &s);
    }
    struct prefetch_stats st;
    prefetch_stats(pf, &st);
    cr_expect_eq(st.held, 0);
    prefetch_stop(pf);
    dataset_close(fed);
    dataset_close(direct);
}
