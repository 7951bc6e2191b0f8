/*
 * test_shares.c — a replica's dataset (share_rank of share_n) writes only its share of each batch,
 * the rows dataset_share gives it, from the start of its batch buffer (which holds a share's rows,
 * not a batch's), and reads only the partitions its shares touch; with a shuffle
 * buffer it makes the one reader's draws and writes its share's rows of them. Partitions are
 * tmp_write_partitions's: global row g holds (g, -g), so every row says where it belongs.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "tmpdir.h"

TMP_SUITE(shares);

static struct dataset *open_share(const char *url, size_t batch, int rank, int n, bool shuffle, bool drop_last)
{
    struct dataset_config c = {.url = url, .header = DATASET_HEADER_NO, .dtype = STORE_F64, .batch_size = batch,
                               .drop_last = drop_last, .seed = 7, .shuffle_partitions = shuffle,
                               .share_rank = rank, .share_n = n, .parse_threads = 1};
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "%s", e.msg);
    return ds;
}

Test(shares, the_shares_give_each_replica_the_rows_dataset_share_names)
{
    size_t lo, count, total = 0;
    for (int r = 0; r < 3; r++) {
        dataset_share(10, r, 3, &lo, &count);
        cr_assert_eq(lo, total, "rank %d starts where rank %d ended", r, r - 1);
        cr_assert(count == 3 || count == 4);
        total += count;
    }
    cr_assert_eq(total, 10);
}

Test(shares, a_replicas_batch_buffer_holds_the_largest_share_of_a_batch)
{
    static const int sizes[] = {10};
    tmp_write_partitions(dir, sizes, 1);
    char *url = tmp_path(dir, "part-*.csv");
    for (int r = 0; r < 3; r++) {
        struct dataset *ds = open_share(url, 10, r, 3, false, false);
        cr_assert_eq(dataset_batch_bytes(ds), 4 * dataset_row_bytes(ds), "rank %d: 10 rows in 3 shares, 4 at most", r);
        dataset_close(ds);
    }
    struct dataset *one = open_share(url, 10, 0, 1, false, false);
    cr_assert_eq(dataset_batch_bytes(one), 10 * dataset_row_bytes(one), "one replica holds the whole batch");
    dataset_close(one);
    free(url);
}

Test(shares, a_replica_reads_only_the_partition_its_share_lies_in)
{
    static const int sizes[] = {10, 10, 10};
    tmp_write_partitions(dir, sizes, 3);
    char *url = tmp_path(dir, "part-*.csv");
    for (int r = 0; r < 3; r++) {
        struct dataset *ds = open_share(url, 30, r, 3, false, false);
        double batch[30 * 2];
        struct err e = {0};
        for (int epoch = 0; epoch < 2; epoch++) {
            memset(batch, 0, sizeof batch);
            size_t rows;
            cr_assert_eq(dataset_next_batch(ds, batch, &rows, NULL, &e), ERR_OK, "%s", e.msg);
            cr_assert_eq(rows, 30, "the batch's rows, not the share's");
            for (int g = 10 * r; g < 10 * r + 10; g++)
                cr_assert(batch[2 * (g - 10 * r)] == g && batch[2 * (g - 10 * r) + 1] == -g, "rank %d, row %d", r, g);
        }
        struct dataset_stats st;
        dataset_stats(ds, &st);
        cr_assert_eq(st.parsed, 1, "rank %d parsed %llu partitions", r, (unsigned long long)st.parsed);
        dataset_close(ds);
    }
    free(url);
}

/* Every rank's share of every batch (two epochs) is what the whole dataset's batch holds there. */
static void check_shares(const char *url, size_t batch, int n, bool shuffle, bool drop_last)
{
    struct dataset *all = open_share(url, batch, 0, 0, shuffle, drop_last);
    struct dataset *ranks[4];
    for (int r = 0; r < n; r++)
        ranks[r] = open_share(url, batch, r, n, shuffle, drop_last);
    double *want = malloc(batch * 2 * sizeof *want), *got = malloc(batch * 2 * sizeof *got);
    struct err e = {0};
    for (int k = 0; k < 12; k++) {
        size_t rows, rrows;
        struct dataset_cursor at, rat;
        cr_assert_eq(dataset_next_batch(all, want, &rows, &at, &e), ERR_OK, "%s", e.msg);
        for (int r = 0; r < n; r++) {
            cr_assert_eq(dataset_next_batch(ranks[r], got, &rrows, &rat, &e), ERR_OK, "%s", e.msg);
            cr_assert(rrows == rows && rat.epoch == at.epoch && rat.batch == at.batch, "batch %d, rank %d", k, r);
            size_t lo, count;
            dataset_share(rows, r, n, &lo, &count);
            cr_assert(memcmp(got, want + 2 * lo, count * 2 * sizeof *got) == 0, "batch %d, rank %d", k, r);
        }
    }
    for (int r = 0; r < n; r++)
        dataset_close(ranks[r]);
    dataset_close(all);
    free(want);
    free(got);
}

Test(shares, shares_of_batches_across_partitions_are_the_whole_batches_rows)
{
    static const int sizes[] = {7, 0, 13, 5, 9, 1};
    tmp_write_partitions(dir, sizes, 6);
    char *url = tmp_path(dir, "part-*.csv");
    check_shares(url, 8, 3, false, false);
    check_shares(url, 8, 3, false, true);
    check_shares(url, 8, 2, true, false);
    check_shares(url, 3, 4, true, true);
    free(url);
}

/* Rank `rank` of n (n 0: the one reader) with a shuffle buffer of `buffer` rows; resident_limit 1: nothing kept. */
static struct dataset *open_buffered(const char *url, size_t batch, int rank, int n, size_t buffer, bool drop_last,
                                     size_t resident_limit)
{
    struct dataset_config c = {.url = url, .header = DATASET_HEADER_NO, .dtype = STORE_F64, .batch_size = batch,
                               .drop_last = drop_last, .seed = 11, .shuffle_partitions = true,
                               .shuffle_buffer = buffer, .resident_limit = resident_limit,
                               .share_rank = rank, .share_n = n, .parse_threads = 1};
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "%s", e.msg);
    return ds;
}

#define UNTOUCHED 1e300 /* what a replica's batch buffer holds past its share */

/*
 * Reads `batches` batches (several epochs) from the one reader and from n buffered replicas: the
 * replicas' shares, put side by side, are the one reader's batch row for row, and a replica writes
 * its share's rows only, from the start of its buffer. Before batch reopen_at (mid-epoch; -1: never) the
 * replicas are closed, opened again and sought to the one reader's cursor, as a resumed job's are.
 */
static void check_buffered_shares(const char *url, size_t batch, int n, size_t buffer, bool drop_last, int batches,
                                  int reopen_at, const int *model)
{
    size_t delivered = 0; /* rows so far, where model (or NULL) lists every label in delivery order */
    struct dataset *all = open_buffered(url, batch, 0, 0, buffer, drop_last, 0), *ranks[3];
    for (int r = 0; r < n; r++)
        ranks[r] = open_buffered(url, batch, r, n, buffer, drop_last, 0);
    double *want = malloc(batch * 2 * sizeof *want), *got = malloc(batch * 2 * sizeof *got);
    double *joined = malloc(batch * 2 * sizeof *joined);
    struct err e = {0};
    for (int k = 0; k < batches; k++) {
        if (k == reopen_at) {
            struct dataset_cursor c;
            dataset_tell(all, &c);
            cr_assert(c.batch > 0, "batch %d is not mid-epoch", k);
            for (int r = 0; r < n; r++) {
                dataset_close(ranks[r]);
                ranks[r] = open_buffered(url, batch, r, n, buffer, drop_last, 0);
                cr_assert_eq(dataset_seek(ranks[r], &c, &e), ERR_OK, "rank %d: %s", r, e.msg);
            }
        }
        size_t rows, rrows, joined_rows = 0;
        struct dataset_cursor at, rat;
        cr_assert_eq(dataset_next_batch(all, want, &rows, &at, &e), ERR_OK, "%s", e.msg);
        for (int r = 0; r < n; r++) {
            for (size_t i = 0; i < batch * 2; i++)
                got[i] = UNTOUCHED;
            cr_assert_eq(dataset_next_batch(ranks[r], got, &rrows, &rat, &e), ERR_OK, "%s", e.msg);
            cr_assert(rrows == rows && rat.epoch == at.epoch && rat.batch == at.batch, "batch %d, rank %d", k, r);
            size_t lo, count;
            dataset_share(rows, r, n, &lo, &count);
            for (size_t i = count; i < batch; i++)
                cr_assert(got[2 * i] == UNTOUCHED && got[2 * i + 1] == UNTOUCHED,
                          "batch %d, rank %d wrote row %zu, past its share of %zu rows", k, r, i, count);
            memcpy(joined + 2 * joined_rows, got, count * 2 * sizeof *got);
            joined_rows += count;
        }
        cr_assert_eq(joined_rows, rows, "batch %d", k);
        for (size_t i = 0; i < rows; i++)
            cr_assert(joined[2 * i] == want[2 * i] && joined[2 * i + 1] == want[2 * i + 1],
                      "batch %d (epoch %llu), row %zu: the shares give %g, the one reader %g", k,
                      (unsigned long long)at.epoch, i, joined[2 * i], want[2 * i]);
        for (size_t i = 0; model && i < rows; i++, delivered++)
            cr_assert(joined[2 * i] == model[delivered], "batch %d (epoch %llu), row %zu: the shares give %g, the "
                      "model of the draws %d", k, (unsigned long long)at.epoch, i, joined[2 * i], model[delivered]);
    }
    for (int r = 0; r < n; r++)
        dataset_close(ranks[r]);
    dataset_close(all);
    free(want);
    free(got);
    free(joined);
}

Test(shares, buffered_replicas_shares_joined_are_the_one_readers_batches)
{
    static const int sizes[] = {7, 0, 13, 5, 9, 1}; /* 35 rows: an epoch of 5 batches of 8, the last of 3 */
    tmp_write_partitions(dir, sizes, 6);
    char *url = tmp_path(dir, "part-*.csv");
    check_buffered_shares(url, 8, 2, 10, false, 16, -1, NULL);
    check_buffered_shares(url, 8, 3, 10, false, 16, -1, NULL);
    check_buffered_shares(url, 8, 3, 5, true, 16, -1, NULL);   /* a buffer smaller than a batch; no short tail */
    check_buffered_shares(url, 7, 3, 100, false, 16, -1, NULL); /* a buffer larger than the epoch */
    free(url);
}

Test(shares, buffered_replicas_resumed_mid_epoch_go_on_with_the_one_readers_batches)
{
    static const int sizes[] = {7, 0, 13, 5, 9, 1};
    tmp_write_partitions(dir, sizes, 6);
    char *url = tmp_path(dir, "part-*.csv");
    check_buffered_shares(url, 8, 2, 10, false, 16, 2, NULL);  /* epoch 0, batch 2 */
    check_buffered_shares(url, 8, 3, 10, false, 16, 7, NULL);  /* epoch 1, batch 2 */
    check_buffered_shares(url, 8, 3, 5, true, 16, 6, NULL);    /* epoch 1, batch 2 of 4 */
    free(url);
}

/* Labels in delivery order from tests/fixtures/storage_shuffle_make.py's model of the draws: *rows of each epoch. */
static int *model_order(int *epochs, int *rows)
{
    FILE *f = fopen(FIXTURES_DIR "/storage_shuffle_order.txt", "r");
    cr_assert_not_null(f, "%s/storage_shuffle_order.txt", FIXTURES_DIR);
    cr_assert_eq(fscanf(f, "%d %d", epochs, rows), 2);
    int *order = malloc((size_t)*epochs * (size_t)*rows * sizeof *order);
    for (int i = 0; i < *epochs * *rows; i++)
        cr_assert_eq(fscanf(f, "%d", &order[i]), 1, "label %d", i);
    fclose(f);
    return order;
}

Test(shares, buffered_replicas_deliver_the_rows_in_the_order_a_model_of_the_draws_gives)
{
    static const int sizes[] = {7, 0, 13, 5, 9, 1}; /* seed 11, buffer 10, partitions shuffled: the model's */
    tmp_write_partitions(dir, sizes, 6);
    char *url = tmp_path(dir, "part-*.csv");
    int epochs, rows, *model = model_order(&epochs, &rows);
    cr_assert_eq(rows, 35);
    int batches = epochs * 5; /* 5 batches of 8 an epoch */
    check_buffered_shares(url, 8, 1, 10, false, batches, -1, model);
    check_buffered_shares(url, 8, 2, 10, false, batches, -1, model);
    check_buffered_shares(url, 8, 3, 10, false, batches, 8, model); /* resumed at epoch 1, batch 3 */
    free(model);
    free(url);
}

Test(shares, a_buffered_replica_reads_every_partition)
{
    /* the buffer mixes every partition's rows into every share, so each replica parses all of them */
    static const int sizes[] = {10, 10, 10};
    tmp_write_partitions(dir, sizes, 3);
    char *url = tmp_path(dir, "part-*.csv");
    struct dataset *ds = open_buffered(url, 30, 2, 3, 4, false, 0);
    double batch[30 * 2];
    size_t rows;
    struct err e = {0};
    cr_assert_eq(dataset_next_batch(ds, batch, &rows, NULL, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(rows, 30, "the batch's rows, not the share's");
    struct dataset_stats st;
    dataset_stats(ds, &st);
    cr_assert_eq(st.parsed, 3, "parsed %llu partitions", (unsigned long long)st.parsed);
    dataset_close(ds);
    free(url);
}

Test(shares, a_buffered_replicas_failed_batch_is_retried_exactly)
{
    /* a partition gone for a moment: the replica's buffer, out of step, is rebuilt at its cursor */
    static const int sizes[] = {7, 0, 13, 5, 9, 1};
    tmp_write_partitions(dir, sizes, 6);
    char *url = tmp_path(dir, "part-*.csv");
    tmp_mkdir(dir, "flaky");
    char *flaky_dir = tmp_path(dir, "flaky");
    tmp_write_partitions(flaky_dir, sizes, 6);
    char *flaky_url = tmp_path(flaky_dir, "part-*.csv");
    char *victim = tmp_path(flaky_dir, "part-00003.csv"), *aside = tmp_path(flaky_dir, "aside.csv");
    struct dataset *all = open_buffered(url, 8, 0, 0, 10, false, 0);
    struct dataset *rank = open_buffered(flaky_url, 8, 1, 3, 10, false, 1); /* nothing kept: files are re-read */
    double want[16], got[16];
    int failures = 0;
    for (int k = 0; k < 16; k++) {
        size_t rows, rrows, lo, count;
        struct err e = {0};
        cr_assert_eq(dataset_next_batch(all, want, &rows, NULL, &e), ERR_OK, "%s", e.msg);
        if (k == 6)
            cr_assert_eq(rename(victim, aside), 0);
        int rc = dataset_next_batch(rank, got, &rrows, NULL, &e);
        if (rc != ERR_OK) {
            cr_assert_eq(rc, ERR_DATA_UNAVAILABLE, "%s", e.msg);
            failures++;
            cr_assert_eq(rename(aside, victim), 0);
            rc = dataset_next_batch(rank, got, &rrows, NULL, &e);
        }
        cr_assert_eq(rc, ERR_OK, "%s", e.msg);
        cr_assert_eq(rrows, rows, "batch %d", k);
        dataset_share(rows, 1, 3, &lo, &count);
        cr_assert_arr_eq(got, want + 2 * lo, count * 2 * sizeof *got, "batch %d", k);
    }
    cr_assert_eq(failures, 1);
    dataset_close(rank);
    dataset_close(all);
    free(victim);
    free(aside);
    free(flaky_url);
    free(flaky_dir);
    free(url);
}
