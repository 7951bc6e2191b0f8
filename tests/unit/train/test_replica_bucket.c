/*
 * test_replica_bucket.c — a rank's comm thread (train/replica_bucket.c) with a reduce function
 * of the test's standing in for the world's all-reduce: the buckets go tail first, each weighted,
 * in the same order every step; a bucket whose reduce fails (the world ended, a peer process
 * past its deadline) gives up the step's other buckets, and the rank gets that error at once;
 * a queued bucketer (GPUs) hands the buckets over on the caller's thread as they complete.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "backend.h"
#include "nn.h"
#include "replica_bucket.h"

#define MAX_CALLS 16

/* What the reduce function saw: each call's range of the flat gradient and first element. */
struct calls {
    const double *base;
    size_t lo[MAX_CALLS], count[MAX_CALLS];
    double first[MAX_CALLS];
    int n, fail_at;   /* fail_at: the call (from 0) that fails, -1 none */
    bool strange;     /* a call for another rank or dtype, or too many (checked on the test's thread) */
};

/* On the comm thread: records, never asserts (Criterion's asserts belong to the test's thread). */
static int reduce(void *ctx, int rank, const struct backend *be, void *buf, size_t count, enum tensor_dtype dt,
                  struct err *e)
{
    struct calls *c = ctx;
    (void)be;
    int k = c->n++;
    if (rank != 3 || dt != TENSOR_F64 || k >= MAX_CALLS) {
        c->strange = true;
        return err_set(e, ERR_INTERNAL, "rank %d, dtype %d, call %d", rank, (int)dt, k);
    }
    c->lo[k] = (size_t)((const double *)buf - c->base);
    c->count[k] = count;
    c->first[k] = *(const double *)buf;
    if (k == c->fail_at)
        return err_set(e, ERR_CANCELLED, "all-reduce across ranks: rank 1: no partial sum within 2 s");
    return 0;
}

/* The baseline's linear model on 8 features: 9 float64s in its flat gradient, all ones. */
static struct nn_model *model_of_ones(void)
{
    struct nn_model *m;
    struct err e = {0};
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 8, &m, &e), 0, "%s", e.msg);
    struct tensor *g = nn_grads_flat(m);
    cr_assert_eq(tensor_numel(g), 9);
    for (int i = 0; i < 9; i++)
        ((double *)g->data)[i] = 1;
    return m;
}

/* Buckets of 4 elements over 9: [5, 9), [1, 5), [0, 1), each reduced once, scaled by the weight. */
Test(replica_bucket, buckets_go_tail_first_each_weighted_and_in_the_same_order_each_step)
{
    struct nn_model *m = model_of_ones();
    struct calls c = {.base = (const double *)nn_grads_flat(m)->data, .fail_at = -1};
    struct rbucket *b;
    struct err e = {0};
    cr_assert_eq(rbucket_new(reduce, &c, 3, &b, &e), 0, "%s", e.msg);
    for (int step = 0; step < 2; step++) {
        rbucket_begin(b, m, 0.25, 4);
        rbucket_ready(b, 5);   /* backward has completed the tail [5, 9) */
        int buckets = 0;
        double hidden = -1;
        cr_assert_eq(rbucket_finish(b, &buckets, &hidden, &e), 0, "%s", e.msg);
        cr_expect_eq(buckets, 3);
        cr_expect_geq(hidden, 0);
    }
    rbucket_free(b);
    cr_assert_not(c.strange);
    static const size_t lo[] = {5, 1, 0}, count[] = {4, 4, 1};
    cr_assert_eq(c.n, 6, "%d reduces", c.n);
    for (int k = 0; k < 6; k++) {
        cr_expect_eq(c.lo[k], lo[k % 3], "reduce %d: from element %zu", k, c.lo[k]);
        cr_expect_eq(c.count[k], count[k % 3], "reduce %d: %zu elements", k, c.count[k]);
        cr_expect_eq(c.first[k], k < 3 ? 0.25 : 0.0625, "reduce %d: first element %g", k, c.first[k]);
    }
    nn_model_free(m);
}

/* The second of three buckets fails: the third is never reduced, and finish gives its error. */
Test(replica_bucket, a_failed_bucket_gives_up_the_rest_and_the_rank_gets_its_error)
{
    struct nn_model *m = model_of_ones();
    struct calls c = {.base = (const double *)nn_grads_flat(m)->data, .fail_at = 1};
    struct rbucket *b;
    struct err e = {0};
    cr_assert_eq(rbucket_new(reduce, &c, 3, &b, &e), 0, "%s", e.msg);
    rbucket_begin(b, m, 1, 4);
    int buckets = 0;
    double hidden = 0;
    cr_expect_eq(rbucket_finish(b, &buckets, &hidden, &e), ERR_CANCELLED);
    cr_expect_str_eq(e.msg, "all-reduce across ranks: rank 1: no partial sum within 2 s");
    rbucket_free(b);
    cr_expect_not(c.strange);
    cr_expect_eq(c.n, 2, "%d reduces after the failed one", c.n - 2);
    nn_model_free(m);
}

/*
 * A queued bucketer (GPUs) has no thread: each bucket goes to reduce on the caller's thread
 * within the rbucket_ready that completes it, tail first and weighted; finish queues the rest,
 * and a failed one gives up those after it as the threaded one does.
 */
Test(replica_bucket, a_queued_bucketer_hands_each_bucket_over_as_backward_completes_it)
{
    struct nn_model *m = model_of_ones();
    struct calls c = {.base = (const double *)nn_grads_flat(m)->data, .fail_at = 3};
    struct rbucket *b;
    struct err e = {0};
    cr_assert_eq(rbucket_new_queued(reduce, &c, 3, &b, &e), 0, "%s", e.msg);
    rbucket_begin(b, m, 0.5, 4);
    rbucket_ready(b, 6);
    cr_expect_eq(c.n, 0, "a bucket reduced before it was complete");
    rbucket_ready(b, 5);
    cr_expect_eq(c.n, 1, "%d reduces once [5, 9) was complete", c.n);
    int buckets = 0;
    double hidden = -1;
    cr_assert_eq(rbucket_finish(b, &buckets, &hidden, &e), 0, "%s", e.msg);
    cr_expect_eq(c.n, 3);
    cr_expect_eq(buckets, 3);
    cr_expect_eq(hidden, 0);
    static const size_t lo[] = {5, 1, 0};
    for (int k = 0; k < 3; k++) {
        cr_expect_eq(c.lo[k], lo[k], "reduce %d: from element %zu", k, c.lo[k]);
        cr_expect_eq(c.first[k], 0.5, "reduce %d: first element %g", k, c.first[k]);
    }
    rbucket_begin(b, m, 1, 4);   /* the next step's first bucket fails (call 3): the others are given up */
    cr_expect_eq(rbucket_finish(b, &buckets, &hidden, &e), ERR_CANCELLED);
    cr_expect_eq(c.n, 4, "%d reduces after the failed one", c.n - 4);
    rbucket_free(b);
    cr_expect_not(c.strange);
    nn_model_free(m);
}
