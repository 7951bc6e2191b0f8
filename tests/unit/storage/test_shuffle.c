/* test_shuffle.c — seeded shuffles: a function of (seed, epoch), every row once an epoch, bounded buffer, seek. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "tmpdir.h"

TMP_SUITE(storage);
static char url[4096];

static struct dataset_config config(size_t batch, uint64_t seed, bool parts, size_t buffer)
{
    snprintf(url, sizeof url, "%s/part-*.csv", dir);
    struct dataset_config c = {.url = url, .header = DATASET_HEADER_NO, .dtype = STORE_F64, .batch_size = batch,
                               .seed = seed, .shuffle_partitions = parts, .shuffle_buffer = buffer};
    return c;
}

static struct dataset *open_ok(const struct dataset_config *c)
{
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(c, &ds, &e), ERR_OK, "dataset_open: %s", e.msg);
    return ds;
}

/* Reads whole epochs and returns the label of every row in delivery order (epochs * total values). */
static int *read_epochs(const struct dataset_config *c, int total, int epochs)
{
    struct dataset *ds = open_ok(c);
    int *order = malloc((size_t)total * (size_t)epochs * sizeof *order);
    double *b = malloc(c->batch_size * 2 * sizeof *b);
    size_t n = 0;
    for (int ep = 0; ep < epochs; ep++) {
        int got = 0;
        while (got < total) {
            size_t rows;
            struct dataset_cursor at;
            struct err e = {0};
            cr_assert_eq(dataset_next_batch(ds, b, &rows, &at, &e), ERR_OK, "%s", e.msg);
            cr_assert_eq(at.epoch, (uint64_t)ep, "a batch of epoch %llu inside epoch %d",
                         (unsigned long long)at.epoch, ep);
            for (size_t r = 0; r < rows; r++) {
                cr_assert_eq(b[2 * r + 1], -b[2 * r], "row torn apart");
                order[n++] = (int)b[2 * r];
            }
            got += (int)rows;
        }
        cr_assert_eq(got, total, "epoch %d delivered %d rows of %d", ep, got, total);
    }
    free(b);
    dataset_close(ds);
    return order;
}

static void assert_permutation(const int *order, int total, const char *what)
{
    char *seen = calloc((size_t)total, 1);
    for (int i = 0; i < total; i++) {
        cr_assert(order[i] >= 0 && order[i] < total, "%s: row %d out of range", what, order[i]);
        cr_assert_eq(seen[order[i]], 0, "%s: row %d delivered twice", what, order[i]);
        seen[order[i]] = 1;
    }
    free(seen);
}

static int same_order(const int *a, const int *b, int n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

static const int sizes[6] = {13, 40, 7, 25, 31, 4}; /* 120 rows */

Test(storage, same_seed_and_epoch_give_the_same_batches)
{
    int total = tmp_write_partitions(dir, sizes, 6);
    struct dataset_config c = config(16, 7, true, 23);
    int *a = read_epochs(&c, total, 3), *b = read_epochs(&c, total, 3);
    cr_assert(same_order(a, b, 3 * total), "two readers of one (seed, epoch) disagree");
    free(a);
    free(b);
}

Test(storage, different_epochs_and_seeds_give_different_orders)
{
    int total = tmp_write_partitions(dir, sizes, 6);
    struct dataset_config c = config(16, 7, true, 23);
    int *a = read_epochs(&c, total, 2);
    cr_assert_not(same_order(a, a + total, total), "epochs 0 and 1 have the same order");
    c.seed = 8;
    int *b = read_epochs(&c, total, 1);
    cr_assert_not(same_order(a, b, total), "seeds 7 and 8 give the same order");
    free(a);
    free(b);
}

Test(storage, every_epoch_is_a_permutation_of_all_rows)
{
    int total = tmp_write_partitions(dir, sizes, 6);
    const size_t buffers[5] = {0, 1, 5, 64, 1000};
    const size_t batches[3] = {1, 16, 50};
    for (int parts = 0; parts < 2; parts++)
        for (int bi = 0; bi < 5; bi++)
            for (int ba = 0; ba < 3; ba++)
                for (int tiny = 0; tiny < 2; tiny++) {
                    struct dataset_config c = config(batches[ba], 3, parts, buffers[bi]);
                    c.resident_limit = tiny ? 1 : 0; /* 1 byte: every partition is parsed again each time */
                    int *o = read_epochs(&c, total, 3);
                    char what[128];
                    for (int ep = 0; ep < 3; ep++) {
                        snprintf(what, sizeof what, "partitions %d buffer %zu batch %zu epoch %d", parts,
                                 buffers[bi], batches[ba], ep);
                        assert_permutation(o + ep * total, total, what);
                    }
                    free(o);
                }
}

Test(storage, shuffled_partitions_keep_their_rows_together_and_in_order)
{
    int total = tmp_write_partitions(dir, sizes, 6);
    struct dataset_config c = config(7, 11, true, 0);
    int *o = read_epochs(&c, total, 4);
    int starts[6], g = 0, differs = 0;
    for (int p = 0; p < 6; p++) {
        starts[p] = g;
        g += sizes[p];
    }
    int first_of_epoch0[6];
    for (int ep = 0; ep < 4; ep++) {
        const int *e = o + ep * total;
        int i = 0;
        for (int k = 0; k < 6; k++) {
            int p = 0;
            while (p < 6 && starts[p] != e[i])
                p++;
            cr_assert(p < 6, "epoch %d: partition %d does not start at a partition's first row", ep, k);
            for (int r = 0; r < sizes[p]; r++, i++)
                cr_assert_eq(e[i], starts[p] + r, "epoch %d: partition %d out of order", ep, p);
            if (ep == 0)
                first_of_epoch0[k] = p;
            else
                differs |= first_of_epoch0[k] != p;
        }
    }
    cr_assert(differs, "four epochs with the same partition order");
    free(o);
}

Test(storage, a_buffer_of_one_row_keeps_the_stream_order)
{
    int total = tmp_write_partitions(dir, sizes, 6);
    struct dataset_config c = config(9, 5, false, 1);
    int *o = read_epochs(&c, total, 2);
    for (int i = 0; i < 2 * total; i++)
        cr_assert_eq(o[i], i % total);
    free(o);
}

Test(storage, a_row_leaves_the_buffer_only_after_it_entered)
{
    /* Bounded shuffle: output position t holds a stream row < t + buffer, and the order is not the stream's. */
    int total = tmp_write_partitions(dir, sizes, 6);
    const size_t buffer = 10;
    struct dataset_config c = config(8, 1, false, buffer);
    int *o = read_epochs(&c, total, 1);
    int moved = 0;
    for (int t = 0; t < total; t++) {
        cr_assert_lt(o[t], t + (int)buffer, "row %d delivered at %d, before it could enter the buffer", o[t], t);
        moved += o[t] != t;
    }
    cr_assert_gt(moved, total / 2, "a buffer of %zu left most rows in place", buffer);
    free(o);
}

Test(storage, seek_to_every_cursor_matches_sequential_reading_with_shuffles)
{
    int total = tmp_write_partitions(dir, sizes, 6);
    (void)total;
    for (int drop = 0; drop < 2; drop++)
        for (int tiny = 0; tiny < 4; tiny++) {
            struct dataset_config c = config(11, 42, true, tiny < 2 ? 17 : 0); /* buffered, or partitions only */
            c.drop_last = drop;
            c.resident_limit = tiny % 2 ? 1 : 0;
            struct dataset *seq = open_ok(&c), *jump = open_ok(&c);
            double a[22], b[22];
            for (int i = 0; i < 40; i++) {
                size_t ra, rb;
                struct dataset_cursor at, at2;
                struct err e = {0};
                cr_assert_eq(dataset_next_batch(seq, a, &ra, &at, &e), ERR_OK, "%s", e.msg);
                cr_assert_eq(dataset_seek(jump, &at, &e), ERR_OK, "%s", e.msg);
                cr_assert_eq(dataset_next_batch(jump, b, &rb, &at2, &e), ERR_OK, "%s", e.msg);
                cr_assert_eq(ra, rb);
                cr_assert_eq(at.epoch, at2.epoch);
                cr_assert_eq(at.batch, at2.batch);
                cr_assert_arr_eq(a, b, ra * 2 * sizeof(double), "drop_last %d tiny %d call %d", drop, tiny, i);
            }
            dataset_close(seq);
            dataset_close(jump);
        }
}

Test(storage, seek_then_sequential_reading_continues_the_same_stream)
{
    /* After a seek the buffer must be in step for every later batch, not just the first. */
    tmp_write_partitions(dir, sizes, 6);
    struct dataset_config c = config(11, 9, true, 30);
    struct dataset *seq = open_ok(&c), *jump = open_ok(&c);
    double a[22], b[22];
    size_t ra, rb;
    struct err e = {0};
    for (int i = 0; i < 5; i++)
        cr_assert_eq(dataset_next_batch(seq, a, &ra, NULL, &e), ERR_OK, "%s", e.msg);
    struct dataset_cursor to = {0, 5};
    cr_assert_eq(dataset_seek(jump, &to, &e), ERR_OK, "%s", e.msg);
    for (int i = 0; i < 30; i++) {
        cr_assert_eq(dataset_next_batch(seq, a, &ra, NULL, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(dataset_next_batch(jump, b, &rb, NULL, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(ra, rb);
        cr_assert_arr_eq(a, b, ra * 2 * sizeof(double), "batch %d after the seek", i);
    }
    dataset_close(seq);
    dataset_close(jump);
}

Test(storage, a_batch_that_failed_with_a_shuffle_buffer_is_retried_exactly)
{
    /* data unavailable for a moment (a partition gone, then back): the retry gives what a clean reader gives */
    tmp_write_partitions(dir, sizes, 6);
    struct dataset_config c = config(11, 4, true, 30);
    c.resident_limit = 1; /* nothing kept: every partition is read from its file each time */
    struct dataset *clean = open_ok(&c);
    tmp_mkdir(dir, "flaky"); /* the same files, in a directory of their own */
    char *top = dir;
    dir = tmp_path(top, "flaky");
    tmp_write_partitions(dir, sizes, 6);
    c = config(11, 4, true, 30);
    c.resident_limit = 1;
    struct dataset *flaky = open_ok(&c);
    char *victim = tmp_path(dir, "part-00003.csv"), *aside = tmp_path(dir, "aside.csv");
    free(dir);
    dir = top;
    double a[22], b[22];
    int failures = 0;
    for (int i = 0; i < 30; i++) {
        size_t ra, rb;
        struct dataset_cursor ca, cb;
        struct err e = {0};
        cr_assert_eq(dataset_next_batch(clean, a, &ra, &ca, &e), ERR_OK, "%s", e.msg);
        if (i == 3)
            cr_assert_eq(rename(victim, aside), 0);
        int rc = dataset_next_batch(flaky, b, &rb, &cb, &e);
        if (rc != ERR_OK) {
            cr_assert_eq(rc, ERR_DATA_UNAVAILABLE, "%s", e.msg);
            failures++;
            cr_assert_eq(rename(aside, victim), 0);
            rc = dataset_next_batch(flaky, b, &rb, &cb, &e);
        }
        cr_assert_eq(rc, ERR_OK, "%s", e.msg);
        cr_assert_eq(ra, rb);
        cr_assert_eq(ca.epoch, cb.epoch);
        cr_assert_eq(ca.batch, cb.batch, "batch %d", i);
        cr_assert_arr_eq(a, b, ra * 2 * sizeof(double), "batch %d", i);
    }
    cr_assert_eq(failures, 1);
    free(victim);
    free(aside);
    dataset_close(clean);
    dataset_close(flaky);
}

Test(storage, a_buffer_larger_than_a_known_epoch_gives_the_same_order)
{
    /* with shards metadata the epoch's size is known at open and the buffer is cut to it */
    int total = tmp_write_partitions(dir, sizes, 6);
    struct dataset_config c = config(16, 21, true, 1000);
    int *unknown = read_epochs(&c, total, 2);
    tmp_write(dir, "shards.csv", "id,count\n0,13\n1,40\n2,7\n3,25\n4,31\n5,4\n");
    char shards[4200];
    snprintf(shards, sizeof shards, "%s/shards.csv", dir);
    c = config(16, 21, true, 1000);
    c.shards_url = shards;
    int *known = read_epochs(&c, total, 2);
    cr_assert(same_order(unknown, known, 2 * total), "the buffer's size changed the draws");
    assert_permutation(known, total, "epoch 0");
    free(unknown);
    free(known);
}
