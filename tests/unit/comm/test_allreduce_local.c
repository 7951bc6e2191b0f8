/* test_allreduce_local.c — in-process all-reduce: rank-order sums, exactness, odd counts, the mean, determinism. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>

#include "world.h"

#define GUARD 16   /* sentinel elements each side of every buffer */
#define SENTINEL 0xa5

/* Element i of buffer b as a double, and stored from one (rounded to b's dtype). */
static double load(const void *b, enum tensor_dtype dt, size_t i)
{
    return dt == TENSOR_F32 ? (double)((const float *)b)[i] : ((const double *)b)[i];
}

static void store(void *b, enum tensor_dtype dt, size_t i, double v)
{
    if (dt == TENSOR_F32)
        ((float *)b)[i] = (float)v;
    else
        ((double *)b)[i] = v;
}

/* x rounded to dt: a float32 sum or quotient of float32s done in double then rounded is the float32 one. */
static double round_to(enum tensor_dtype dt, double x)
{
    return dt == TENSOR_F32 ? (double)(float)x : x;
}

/* n buffers of count elements with sentinels around them, and a copy of what they held. */
struct ranks {
    int n;
    size_t count;
    enum tensor_dtype dt;
    char *raw[MAX_RANKS];
    void *data[MAX_RANKS];
    double *input[MAX_RANKS];
};

/* Random values of magnitudes 2^-20..2^20, so the order of additions shows in the last bits. */
static double random_value(uint64_t *s)
{
    double m = (double)(int64_t)(test_rand(s) % 2000001) - 1000000.0;
    return ldexp(m / 1000000.0, (int)(test_rand(s) % 41) - 20);
}

/* Integers in -500..500: every sum of up to 8 is exact in both dtypes. */
static double integer_value(uint64_t *s)
{
    return (double)(int64_t)(test_rand(s) % 1001) - 500.0;
}

static void ranks_new(struct ranks *k, int n, size_t count, enum tensor_dtype dt, uint64_t seed,
                      double (*value)(uint64_t *))
{
    size_t size = tensor_dtype_size(dt);
    *k = (struct ranks){.n = n, .count = count, .dt = dt};
    for (int r = 0; r < n; r++) {
        k->raw[r] = malloc((count + 2 * GUARD) * size);
        k->input[r] = malloc((count ? count : 1) * sizeof(double));
        cr_assert(k->raw[r] && k->input[r]);
        memset(k->raw[r], SENTINEL, (count + 2 * GUARD) * size);
        k->data[r] = k->raw[r] + GUARD * size;
        for (size_t i = 0; i < count; i++) {
            store(k->data[r], dt, i, value(&seed));
            k->input[r][i] = load(k->data[r], dt, i);
        }
    }
}

static void ranks_free(struct ranks *k)
{
    for (int r = 0; r < k->n; r++)
        free(k->raw[r]), free(k->input[r]);
}

static void ranks_check_sentinels(const struct ranks *k)
{
    size_t size = tensor_dtype_size(k->dt);
    for (int r = 0; r < k->n; r++)
        for (size_t j = 0; j < GUARD * size; j++) {
            cr_assert_eq((unsigned char)k->raw[r][j], SENTINEL, "rank %d: written before its buffer", r);
            cr_assert_eq((unsigned char)k->raw[r][(GUARD + k->count) * size + j], SENTINEL,
                         "rank %d: written past its buffer", r);
        }
}

/* The all-reduce of k's buffers by k->n threads; every rank must succeed. */
static void ranks_allreduce(struct ranks *k, enum comm_op op)
{
    struct world_run w = {.n = k->n, .count = k->count, .dt = k->dt, .op = op};
    memcpy(w.bufs, k->data, sizeof w.bufs);
    world_run(&w);
    world_assert_ok(&w);
    ranks_check_sentinels(k);
}

/* ((in0 + in1) + in2) + ..., in the dtype's rounding; from the last rank down when `reversed`. */
static double rank_order_sum(const struct ranks *k, size_t i, bool reversed)
{
    double acc = k->input[reversed ? k->n - 1 : 0][i];
    for (int j = 1; j < k->n; j++)
        acc = round_to(k->dt, acc + k->input[reversed ? k->n - 1 - j : j][i]);
    return acc;
}

/* Every rank holds, to the bit, the rank-order sum (divided by n for the mean). */
static void assert_rank_order_result(const struct ranks *k, enum comm_op op)
{
    for (size_t i = 0; i < k->count; i++) {
        double want = rank_order_sum(k, i, false);
        if (op == COMM_MEAN)
            want = round_to(k->dt, want / k->n);
        for (int r = 0; r < k->n; r++)
            cr_assert_eq(load(k->data[r], k->dt, i), want, "n=%d %s rank %d element %zu: %a, want %a",
                         k->n, tensor_dtype_name(k->dt), r, i, load(k->data[r], k->dt, i), want);
    }
}

/*
 * The rank-order check could fail: with 3 or more ranks and enough elements, some element's
 * sum depends on the order (with a handful of elements none may, by chance).
 */
static void assert_order_matters(const struct ranks *k)
{
    if (k->n < 3 || k->count < 64)
        return;
    size_t differ = 0;
    for (size_t i = 0; i < k->count; i++)
        differ += rank_order_sum(k, i, false) != rank_order_sum(k, i, true);
    cr_assert_gt(differ, 0, "n=%d: no element's sum depends on the order; the inputs prove nothing", k->n);
}

static void check_rank_order_sum(int n, size_t count, enum tensor_dtype dt, enum comm_op op, uint64_t seed)
{
    struct ranks k;
    ranks_new(&k, n, count, dt, seed, random_value);
    assert_order_matters(&k);
    ranks_allreduce(&k, op);
    assert_rank_order_result(&k, op);
    ranks_free(&k);
}

static const int replica_counts[] = {2, 3, 4, 8};

Test(comm, sums_of_2_3_4_and_8_float32_replicas_equal_their_rank_order_sums)
{
    for (size_t j = 0; j < sizeof replica_counts / sizeof *replica_counts; j++)
        check_rank_order_sum(replica_counts[j], 4099, TENSOR_F32, COMM_SUM, 11 + j);
}

Test(comm, sums_of_2_3_4_and_8_float64_replicas_equal_their_rank_order_sums)
{
    for (size_t j = 0; j < sizeof replica_counts / sizeof *replica_counts; j++)
        check_rank_order_sum(replica_counts[j], 4099, TENSOR_F64, COMM_SUM, 21 + j);
}

Test(comm, sums_of_integer_valued_floats_equal_a_long_double_serial_sum_exactly)
{
    const enum tensor_dtype dts[] = {TENSOR_F32, TENSOR_F64};
    for (int d = 0; d < 2; d++)
        for (size_t j = 0; j < sizeof replica_counts / sizeof *replica_counts; j++) {
            struct ranks k;
            ranks_new(&k, replica_counts[j], 1031, dts[d], 31 + j, integer_value);
            ranks_allreduce(&k, COMM_SUM);
            for (size_t i = 0; i < k.count; i++) {
                long double want = 0;
                for (int r = 0; r < k.n; r++)
                    want += (long double)k.input[r][i];
                for (int r = 0; r < k.n; r++)
                    cr_assert_eq((long double)load(k.data[r], k.dt, i), want, "n=%d %s rank %d element %zu",
                                 k.n, tensor_dtype_name(k.dt), r, i);
            }
            ranks_free(&k);
        }
}

Test(comm, a_count_of_0_leaves_every_buffer_untouched)
{
    struct ranks k;
    ranks_new(&k, 4, 0, TENSOR_F32, 41, random_value);
    ranks_allreduce(&k, COMM_SUM);   /* the sentinels around each empty buffer stay */
    ranks_free(&k);
    struct world_run w = {.n = 3, .count = 0, .dt = TENSOR_F64, .op = COMM_MEAN};  /* no buffers at all */
    world_run(&w);
    world_assert_ok(&w);
}

Test(comm, a_count_of_1_is_summed_with_the_other_ranks_chunks_empty)
{
    check_rank_order_sum(3, 1, TENSOR_F64, COMM_SUM, 51);
    check_rank_order_sum(8, 1, TENSOR_F32, COMM_SUM, 52);
}

Test(comm, counts_not_divisible_by_the_replicas_are_summed_to_the_last_element)
{
    const size_t counts[] = {3, 7, 13, 1003};   /* fewer than 8, and 8k + 3, 5, 3 */
    for (size_t j = 0; j < sizeof counts / sizeof *counts; j++) {
        check_rank_order_sum(8, counts[j], TENSOR_F32, COMM_SUM, 61 + j);
        check_rank_order_sum(3, counts[j] + 1, TENSOR_F64, COMM_SUM, 71 + j);
    }
}

Test(comm, a_million_element_buffer_is_summed)
{
    check_rank_order_sum(4, (size_t)1 << 20, TENSOR_F32, COMM_SUM, 81);
}

Test(comm, the_mean_is_the_rank_order_sum_divided_by_the_replicas)
{
    check_rank_order_sum(3, 1001, TENSOR_F32, COMM_MEAN, 91);
    check_rank_order_sum(8, 1001, TENSOR_F64, COMM_MEAN, 92);
}

Test(comm, a_world_of_one_replica_leaves_its_buffer_as_it_was)
{
    check_rank_order_sum(1, 100, TENSOR_F32, COMM_SUM, 101);
    check_rank_order_sum(1, 100, TENSOR_F64, COMM_MEAN, 102);
}

/* The bytes of every rank's buffer after one all-reduce of the same inputs, arrivals delayed at random. */
static void run_with_delays(struct ranks *k, uint64_t seed, char *out[MAX_RANKS])
{
    size_t bytes = k->count * tensor_dtype_size(k->dt);
    for (int r = 0; r < k->n; r++)
        for (size_t i = 0; i < k->count; i++)
            store(k->data[r], k->dt, i, k->input[r][i]);
    struct world_run w = {.n = k->n, .count = k->count, .dt = k->dt, .op = COMM_MEAN,
                          .max_sleep_us = 2000, .seed = seed};
    memcpy(w.bufs, k->data, sizeof w.bufs);
    world_run(&w);
    world_assert_ok(&w);
    for (int r = 0; r < k->n; r++)
        memcpy(out[r], k->data[r], bytes);
}

Test(comm, results_are_bit_identical_across_replicas_and_20_runs_with_random_arrival_delays)
{
    struct ranks k;
    ranks_new(&k, 5, 3001, TENSOR_F32, 111, random_value);
    assert_order_matters(&k);
    size_t bytes = k.count * sizeof(float);
    char *first[MAX_RANKS], *now[MAX_RANKS];
    for (int r = 0; r < k.n; r++)
        first[r] = malloc(bytes), now[r] = malloc(bytes);
    run_with_delays(&k, 1, first);
    for (int r = 1; r < k.n; r++)
        cr_assert_eq(memcmp(first[r], first[0], bytes), 0, "rank %d differs from rank 0", r);
    for (int run = 2; run <= 20; run++) {
        run_with_delays(&k, (uint64_t)run, now);
        for (int r = 0; r < k.n; r++)
            cr_assert_eq(memcmp(now[r], first[0], bytes), 0, "run %d rank %d differs from run 1", run, r);
    }
    for (int r = 0; r < k.n; r++)
        free(first[r]), free(now[r]);
    ranks_free(&k);
}

/* 40 all-reduces on one world, by fresh threads, the count and dtype changing between them. */
Test(comm, one_world_serves_successive_allreduces_of_changing_sizes_and_dtypes)
{
    enum { N = 4, CALLS = 40, MAXC = 257 };
    struct world_run w = {.n = N, .max_sleep_us = 100};
    struct err e = {0};
    cr_assert_eq(comm_local_new(N, &w.c, &e), ERR_OK, "%s", e.msg);
    double bufs[N][MAXC];
    for (int call = 0; call < CALLS; call++) {
        w.count = (size_t)(call * 37) % MAXC;
        w.dt = call % 2 ? TENSOR_F32 : TENSOR_F64;
        w.seed = (uint64_t)call;
        for (int r = 0; r < N; r++) {
            for (size_t i = 0; i < w.count; i++)
                store(bufs[r], w.dt, i, r + 1 + call);
            w.bufs[r] = bufs[r];
        }
        world_run(&w);
        world_assert_ok(&w);
        for (int r = 0; r < N; r++)
            for (size_t i = 0; i < w.count; i++)
                cr_assert_eq(load(bufs[r], w.dt, i), 10 + 4 * call, "call %d rank %d element %zu", call, r, i);
    }
    comm_local_free(w.c);
}

/* The same threads sum 30 times in a row, each time the last results: rank r starts at r + 1. */
Test(comm, replica_threads_run_successive_allreduces_each_summing_the_last_results)
{
    enum { N = 4, REPS = 30, COUNT = 333 };
    static float bufs[N][COUNT];
    for (int r = 0; r < N; r++)
        for (size_t i = 0; i < COUNT; i++)
            bufs[r][i] = (float)(r + 1);
    struct world_run w = {.n = N, .count = COUNT, .dt = TENSOR_F32, .op = COMM_SUM, .reps = REPS,
                          .max_sleep_us = 200, .seed = 7};
    for (int r = 0; r < N; r++)
        w.bufs[r] = bufs[r];
    world_run(&w);
    world_assert_ok(&w);
    double want = ldexp(10, 2 * (REPS - 1));   /* 10, then times 4 a call: exact in float32 */
    for (int r = 0; r < N; r++)
        for (size_t i = 0; i < COUNT; i++)
            cr_assert_eq((double)bufs[r][i], want, "rank %d element %zu: %g", r, i, (double)bufs[r][i]);
}
