/* test_allreduce_abort.c — a failing replica fails the collective for all: abort, bad arguments, no hang. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "world.h"

struct aborter {
    struct comm_local *c;
    long after_us;
    const char *why;
};

static void *abort_main(void *p)
{
    struct aborter *a = p;
    sleep_us(a->after_us);
    cr_assert_eq(comm_local_abort(a->c, a->why), ERR_OK);
    return NULL;
}

static void assert_cancelled(const struct world_run *w, int rank, const char *why)
{
    cr_assert_eq(w->rc[rank], ERR_CANCELLED, "rank %d: code %d, %s", rank, w->rc[rank], w->err[rank].msg);
    cr_assert_eq(w->err[rank].code, ERR_CANCELLED);
    cr_assert_not_null(strstr(w->err[rank].msg, why), "rank %d: \"%s\" does not say \"%s\"", rank,
                       w->err[rank].msg, why);
}

Test(comm, abort_wakes_the_waiting_replicas_with_an_error_naming_why)
{
    /* ranks 0..2 of 4 wait for rank 3, which dies and aborts instead of joining */
    struct err e = {0};
    struct world_run w = {.n = 3, .count = 100, .dt = TENSOR_F32, .op = COMM_MEAN};
    cr_assert_eq(comm_local_new(4, &w.c, &e), ERR_OK, "%s", e.msg);
    float bufs[3][100] = {{0}};
    for (int r = 0; r < 3; r++)
        w.bufs[r] = bufs[r];
    struct aborter a = {w.c, 50000, "replica 3: loss is nan"};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, abort_main, &a), 0);
    world_run(&w);
    cr_assert_eq(pthread_join(th, NULL), 0);
    for (int r = 0; r < 3; r++)
        assert_cancelled(&w, r, "replica 3: loss is nan");
    comm_local_free(w.c);
}

Test(comm, calls_after_an_abort_fail_at_once_with_the_first_reason)
{
    struct err e = {0};
    struct world_run w = {.n = 4, .count = 10, .dt = TENSOR_F64, .op = COMM_SUM};
    cr_assert_eq(comm_local_new(4, &w.c, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(comm_local_abort(w.c, "first reason"), ERR_OK);
    cr_assert_eq(comm_local_abort(w.c, "second reason"), ERR_OK);
    double bufs[4][10] = {{0}};
    for (int r = 0; r < 4; r++)
        w.bufs[r] = bufs[r];
    world_run(&w);
    for (int r = 0; r < 4; r++) {
        assert_cancelled(&w, r, "first reason");
        cr_assert_null(strstr(w.err[r].msg, "second"), "rank %d: %s", r, w.err[r].msg);
    }
    comm_local_free(w.c);
}

Test(comm, a_replica_passing_another_count_fails_and_so_do_its_peers_instead_of_waiting)
{
    const size_t counts[4] = {10, 5, 10, 10};
    struct world_run w = {.n = 4, .counts = counts, .dt = TENSOR_F32, .op = COMM_SUM,
                          .delay_us = {[1] = 50000}};   /* rank 1 comes last */
    float bufs[4][10] = {{0}};
    for (int r = 0; r < 4; r++)
        w.bufs[r] = bufs[r];
    world_run(&w);
    cr_assert_eq(w.rc[1], ERR_INVALID_ARG, "rank 1: code %d, %s", w.rc[1], w.err[1].msg);
    cr_assert_not_null(strstr(w.err[1].msg, "rank 1 passed 5 float32 elements"), "%s", w.err[1].msg);
    for (int r = 0; r < 4; r++)
        if (r != 1)
            assert_cancelled(&w, r, "rank 1 passed 5 float32 elements");
}

Test(comm, a_rank_outside_the_world_is_refused_and_fails_the_world)
{
    struct comm_local *c = NULL;
    struct err e = {0};
    double x = 1;
    cr_assert_eq(comm_local_new(2, &c, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(comm_local_allreduce(c, 2, &x, 1, TENSOR_F64, COMM_SUM, &e), ERR_INVALID_ARG);
    cr_assert_not_null(strstr(e.msg, "rank 2 is not in 0..1"), "%s", e.msg);
    cr_assert_eq(comm_local_allreduce(c, 0, &x, 1, TENSOR_F64, COMM_SUM, &e), ERR_CANCELLED);
    cr_assert_not_null(strstr(e.msg, "rank 2 is not in 0..1"), "%s", e.msg);
    comm_local_free(c);
}

static void *rank0_main(void *p)
{
    struct world_run *w = p;
    double x = 1;
    w->rc[0] = comm_local_allreduce(w->c, 0, &x, 1, TENSOR_F64, COMM_SUM, &w->err[0]);
    return NULL;
}

Test(comm, a_rank_joining_twice_is_refused_and_fails_the_world)
{
    struct world_run w = {.n = 2};
    struct err e = {0};
    cr_assert_eq(comm_local_new(2, &w.c, &e), ERR_OK, "%s", e.msg);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, rank0_main, &w), 0);
    sleep_us(50000);
    double x = 1;
    cr_assert_eq(comm_local_allreduce(w.c, 0, &x, 1, TENSOR_F64, COMM_SUM, &e), ERR_INVALID_ARG, "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, "rank 0 joined twice"), "%s", e.msg);
    cr_assert_eq(pthread_join(th, NULL), 0);
    assert_cancelled(&w, 0, "rank 0 joined twice");
    comm_local_free(w.c);
}

Test(comm, a_world_needs_at_least_one_replica)
{
    struct comm_local *c = (struct comm_local *)&c;
    struct err e = {0};
    cr_assert_eq(comm_local_new(0, &c, &e), ERR_INVALID_ARG);
    cr_assert_null(c);
    cr_assert_not_null(strstr(e.msg, "at least 1 replica"), "%s", e.msg);
}

/* A replica thread that all-reduces a fresh buffer, freed on return, until the world fails. */
struct churn {
    struct comm_local *c;
    int rank;
    int rc;
    struct err err;
};

static void *churn_main(void *p)
{
    struct churn *ch = p;
    enum { COUNT = 1 << 16 };
    do {
        float *buf = malloc(COUNT * sizeof *buf);
        cr_assert_not_null(buf);
        for (size_t i = 0; i < COUNT; i++)
            buf[i] = (float)ch->rank;
        ch->rc = comm_local_allreduce(ch->c, ch->rank, buf, COUNT, TENSOR_F32, COMM_SUM, &ch->err);
        free(buf);
    } while (ch->rc == ERR_OK);
    return NULL;
}

/*
 * Aborts land at random points of the collectives; a rank whose call has returned frees its
 * buffer at once, so a peer still reading it is a use after free (caught under ASan), and a
 * rank that never returns hangs the run until meson's timeout fails it.
 */
Test(comm, a_replica_may_free_its_buffer_as_soon_as_an_aborted_call_returns)
{
    enum { N = 4, ROUNDS = 30 };
    uint64_t s = 5;
    for (int round = 0; round < ROUNDS; round++) {
        struct err e = {0};
        struct churn ch[N];
        pthread_t th[N];
        struct comm_local *c = NULL;
        cr_assert_eq(comm_local_new(N, &c, &e), ERR_OK, "%s", e.msg);
        for (int r = 0; r < N; r++) {
            ch[r] = (struct churn){.c = c, .rank = r};
            cr_assert_eq(pthread_create(&th[r], NULL, churn_main, &ch[r]), 0);
        }
        sleep_us((long)(test_rand(&s) % 3000));
        cr_assert_eq(comm_local_abort(c, "stopped by the test"), ERR_OK);
        for (int r = 0; r < N; r++) {
            cr_assert_eq(pthread_join(th[r], NULL), 0);
            cr_assert_eq(ch[r].rc, ERR_CANCELLED, "round %d rank %d: %s", round, r, ch[r].err.msg);
        }
        comm_local_free(c);
    }
}

Test(comm, a_rank_that_never_comes_fails_the_others_after_the_timeout_naming_it)
{
    /* ranks 0 and 1 of 3 wait for rank 2, which never calls */
    struct err e = {0};
    struct world_run w = {.n = 2, .count = 64, .dt = TENSOR_F64, .op = COMM_SUM};
    cr_assert_eq(comm_local_new(3, &w.c, &e), ERR_OK, "%s", e.msg);
    comm_local_set_timeout(w.c, 0.2);
    double bufs[2][64] = {{0}};
    for (int r = 0; r < 2; r++)
        w.bufs[r] = bufs[r];
    world_run(&w);
    for (int r = 0; r < 2; r++)
        assert_cancelled(&w, r, "no word from replica 2 for 0.2 s");
    cr_expect_eq(comm_local_missing(w.c), 2);
    comm_local_free(w.c);
}

Test(comm, a_timeout_lets_a_late_rank_that_comes_finish_the_collective)
{
    struct err e = {0};
    struct world_run w = {.n = 3, .count = 1000, .dt = TENSOR_F32, .op = COMM_SUM, .reps = 20,
                          .max_sleep_us = 2000, .delay_us = {0, 0, 50000}};
    cr_assert_eq(comm_local_new(3, &w.c, &e), ERR_OK, "%s", e.msg);
    comm_local_set_timeout(w.c, 30);
    float bufs[3][1000];
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < 1000; i++)
            bufs[r][i] = 0;
        w.bufs[r] = bufs[r];
    }
    world_run(&w);
    world_assert_ok(&w);
    cr_expect_eq(comm_local_missing(w.c), -1);
    comm_local_free(w.c);
}
