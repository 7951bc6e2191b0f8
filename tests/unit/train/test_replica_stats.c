/*
 * test_replica_stats.c — spotting a straggler among a job's replicas (replica.h): the rule on
 * the ranks' medians, and the world's figures that feed it, from step times the test makes up.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "replica.h"

Test(replica_stats, a_median_more_than_1_5_times_the_others_median_is_a_straggler)
{
    double ratio = 0;
    double three[] = {1.0, 1.2, 1.9};   /* the others' median: (1.0 + 1.2) / 2 = 1.1 */
    cr_expect_eq(replica_straggler(three, 3, &ratio), 2);
    cr_expect_float_eq(ratio, 1.9 / 1.1, 1e-12);
    double two[] = {0.5, 0.2};
    cr_expect_eq(replica_straggler(two, 2, &ratio), 0);
    cr_expect_float_eq(ratio, 2.5, 1e-12);
    double five[] = {1, 1, 1, 4, 3};    /* rank 3's others: 1 1 1 3, median 1 */
    cr_expect_eq(replica_straggler(five, 5, &ratio), 3);
    cr_expect_float_eq(ratio, 4.0, 1e-12);
}

Test(replica_stats, at_1_5_times_or_less_or_alone_there_is_none)
{
    double ratio = -7;
    double edge[] = {2.0, 2.0, 3.0};
    cr_expect_eq(replica_straggler(edge, 3, &ratio), -1);
    double even[] = {1.0, 1.1, 0.9, 1.2};
    cr_expect_eq(replica_straggler(even, 4, &ratio), -1);
    double one[] = {5.0};
    cr_expect_eq(replica_straggler(one, 1, &ratio), -1);
    cr_expect_eq(ratio, -7, "ratio written without a straggler");
}

/* rank r of w notes steps steps of step_s seconds after a wait of wait_s. */
static void note(struct train_world *w, int r, int steps, double step_s, double wait_s)
{
    for (int i = 0; i < steps; i++)
        train_world_note_step(w, r, step_s, wait_s);
}

static struct train_world *world(int n)
{
    struct train_world *w;
    struct err e = {0};
    cr_assert_eq(train_world_new(n, &w, &e), 0, "%s", e.msg);
    return w;
}

Test(replica_stats, a_rank_slow_at_its_step_or_its_data_for_32_steps_is_found)
{
    struct train_world *w = world(3);
    double ratio = 0;
    note(w, 0, REPLICA_STRAGGLER_STEPS, 0.010, 0.001);
    note(w, 1, REPLICA_STRAGGLER_STEPS, 0.012, 0.001);
    note(w, 2, REPLICA_STRAGGLER_STEPS - 1, 0.010, 0.021);   /* slow data */
    cr_expect_eq(train_world_straggler(w, &ratio), -1, "found before every rank has 32 steps");
    struct replica_stats st;
    train_world_stats(w, 2, &st);
    cr_expect_eq(st.work_median, 0, "a work median before 32 steps");
    note(w, 2, 1, 0.010, 0.021);
    cr_expect_eq(train_world_straggler(w, &ratio), 2);
    cr_expect_float_eq(ratio, 0.031 / 0.012, 1e-9);   /* over the others' median (0.011 + 0.013) / 2 */
    train_world_stats(w, 2, &st);
    cr_expect_float_eq(st.work_median, 0.031, 1e-12);
    cr_expect_eq(st.iterations, REPLICA_STRAGGLER_STEPS);
    train_world_free(w);
}

Test(replica_stats, a_few_slow_steps_or_a_slowness_that_passed_are_not_a_straggler)
{
    struct train_world *w = world(2);
    double ratio;
    note(w, 0, 100, 0.010, 0);
    note(w, 1, 50, 0.080, 0);   /* slow once, then as fast as rank 0 for the last 50 */
    note(w, 1, 40, 0.010, 0);
    note(w, 1, 10, 0.080, 0);   /* 10 of the last 32 slow: fewer than half */
    cr_expect_eq(train_world_straggler(w, &ratio), -1);
    note(w, 1, 7, 0.080, 0);    /* 17 of the last 32 */
    cr_expect_eq(train_world_straggler(w, &ratio), 1);
    cr_expect_float_eq(ratio, 8.0, 1e-9);
    train_world_free(w);
}
