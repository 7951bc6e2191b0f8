/*
 * test_shares.c — a replica's dataset (share_rank of share_n) writes only its share of each batch,
 * the rows dataset_share gives it, and reads only the partitions its shares touch. Partitions are
 * tmp_write_partitions's: global row g holds (g, -g), so every row says where it belongs.
 */
#include <criterion/criterion.h>
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
                cr_assert(batch[2 * g] == g && batch[2 * g + 1] == -g, "rank %d, row %d", r, g);
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
            cr_assert(memcmp(got + 2 * lo, want + 2 * lo, count * 2 * sizeof *got) == 0, "batch %d, rank %d", k, r);
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
