/* world.h — shared by the comm tests: N replica threads running all-reduces on their own buffers. */
#ifndef TRAIND_TEST_COMM_WORLD_H
#define TRAIND_TEST_COMM_WORLD_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"

#define MAX_RANKS 8

/* What every replica thread of one run does: `reps` all-reduces of its buffer. */
struct world_run {
    struct comm_local *c;
    int n;
    void *bufs[MAX_RANKS];
    size_t count;
    const size_t *counts;  /* per rank, in place of count; NULL: count for all */
    enum tensor_dtype dt;
    enum comm_op op;
    int reps;              /* all-reduces per thread; 0 means 1 */
    int max_sleep_us;      /* each arrival waits a random 0..max first (0: none) */
    uint64_t seed;
    int delay_us[MAX_RANKS];  /* a fixed wait of each rank before its first all-reduce */
    int rc[MAX_RANKS];     /* of the last all-reduce */
    struct err err[MAX_RANKS];
};

struct rank_arg {
    struct world_run *w;
    int rank;
};

/* splitmix64: the tests' own generator, independent of core's rng. */
static inline uint64_t test_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void sleep_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000L};
    nanosleep(&t, NULL);
}

static void *rank_main(void *p)
{
    struct rank_arg *a = p;
    struct world_run *w = a->w;
    uint64_t s = w->seed * 1000003u + (uint64_t)a->rank;
    size_t count = w->counts ? w->counts[a->rank] : w->count;
    if (w->delay_us[a->rank] > 0)
        sleep_us(w->delay_us[a->rank]);
    for (int k = 0; k < (w->reps > 0 ? w->reps : 1); k++) {
        if (w->max_sleep_us > 0)
            sleep_us((long)(test_rand(&s) % (uint64_t)(w->max_sleep_us + 1)));
        w->rc[a->rank] = comm_local_allreduce(w->c, a->rank, w->bufs[a->rank], count, w->dt,
                                              w->op, &w->err[a->rank]);
        if (w->rc[a->rank] != ERR_OK)
            break;
    }
    return NULL;
}

/* Runs w's n replica threads (ranks 0..n-1) on a fresh world, or on w->c if set, and waits for all. */
static inline void world_run(struct world_run *w)
{
    struct err e = {0};
    bool own = !w->c;
    if (own)
        cr_assert_eq(comm_local_new(w->n, &w->c, &e), ERR_OK, "comm_local_new: %s", e.msg);
    pthread_t th[MAX_RANKS];
    struct rank_arg args[MAX_RANKS];
    for (int r = 0; r < w->n; r++) {
        args[r] = (struct rank_arg){w, r};
        cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &args[r]), 0);
    }
    for (int r = 0; r < w->n; r++)
        cr_assert_eq(pthread_join(th[r], NULL), 0);
    if (own) {
        comm_local_free(w->c);
        w->c = NULL;
    }
}

static inline void world_assert_ok(const struct world_run *w)
{
    for (int r = 0; r < w->n; r++)
        cr_assert_eq(w->rc[r], ERR_OK, "rank %d: %s", r, w->err[r].msg);
}

#endif
