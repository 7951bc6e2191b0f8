/*
 * test_comm_dev.c — comm/'s all-reduce of device buffers (comm.h's comm_dev, NCCL): N ranks on
 * N GPUs, each a thread with its own CUDA backend, get the sum of their buffers in float64 and
 * float32, over several collectives of one world (one rank is a world too); a rank that
 * never comes makes its peer's wait time out, naming it; an abort releases a waiting rank.
 * Skips with fewer GPUs than the test needs (one GPU runs all but the sums of 2 and 3). In the gpu-emu suite over the emulated runtime and NCCL (TRAIND_EMU_DEVICES=4).
 */
#include <pthread.h>

#include "comm.h"
#include "gpu_test.h"

/* The GPUs here; the test is skipped with fewer than need. */
static int gpus_or_skip(int need)
{
    char why[256] = "";
    int n = 0;
    cr_assert_eq(gpu_device_count(&n, why, sizeof why), 0);
    if (n < need)
        cr_skip_test("%d GPU(s) here (%s): this test needs %d", n, why, need);
    struct err e = {0};
    if (!comm_dev_available(&e))
        cr_skip_test("%s", e.msg);
    return n;
}

#define COUNT 1000   /* not a multiple of any rank count: NCCL's chunks are uneven */
#define ROUNDS 3

struct rank_run {
    struct comm_dev *c;
    int rank;
    enum tensor_dtype dt;
    double got[ROUNDS][COUNT];   /* what the rank's buffer held after each all-reduce */
    struct err e;
};

/* Rank r's element i in round k: small integers and halves, so any order of addition is exact. */
static double value(int r, int i, int k)
{
    return (double)((r + 1) * (i % 97) - 40 * k) * 0.5;
}

static void *rank_main(void *arg)
{
    struct rank_run *rr = arg;
    const struct backend *be = NULL;
    size_t size = tensor_dtype_size(rr->dt);
    void *host = malloc(COUNT * size), *dev = NULL;
    if (!host || be_cuda_factory()->create(rr->rank, &be, &rr->e))
        goto out;
    if (!(dev = be->alloc(be, COUNT * size, &rr->e)))
        goto out;
    for (int k = 0; k < ROUNDS; k++) {
        for (int i = 0; i < COUNT; i++)
            if (rr->dt == TENSOR_F64)
                ((double *)host)[i] = value(rr->rank, i, k);
            else
                ((float *)host)[i] = (float)value(rr->rank, i, k);
        if (be->from_host(be, dev, host, COUNT * size, &rr->e) ||
            comm_dev_allreduce(rr->c, rr->rank, be, dev, COUNT, rr->dt, &rr->e) ||
            be->to_host(be, host, dev, COUNT * size, &rr->e))
            break;
        for (int i = 0; i < COUNT; i++)
            rr->got[k][i] = rr->dt == TENSOR_F64 ? ((double *)host)[i] : ((float *)host)[i];
    }
out:
    if (be) {
        comm_dev_leave(rr->c, rr->rank);
        if (dev)
            be->free(be, dev);
        be_cuda_factory()->destroy(be);
    }
    free(host);
    return NULL;
}

/* n ranks, ranks [0, come) of which call; their outcomes in rr. */
static void run_world(struct comm_dev *c, int come, enum tensor_dtype dt, struct rank_run *rr)
{
    pthread_t th[8];
    for (int r = 0; r < come; r++) {
        rr[r] = (struct rank_run){.c = c, .rank = r, .dt = dt};
        cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &rr[r]), 0);
    }
    for (int r = 0; r < come; r++)
        pthread_join(th[r], NULL);
}

static void expect_sums(int n, enum tensor_dtype dt)
{
    gpus_or_skip(n);
    struct comm_dev *c;
    struct err e = {0};
    cr_assert_eq(comm_dev_new(n, &c, &e), 0, "%s", e.msg);
    comm_dev_set_timeout(c, 60);
    static struct rank_run rr[8];
    run_world(c, n, dt, rr);
    for (int r = 0; r < n; r++) {
        cr_assert_eq(rr[r].e.code, ERR_OK, "rank %d: %s", r, rr[r].e.msg);
        for (int k = 0; k < ROUNDS; k++)
            for (int i = 0; i < COUNT; i++) {
                double want = 0;
                for (int s = 0; s < n; s++)
                    want += value(s, i, k);
                cr_assert_eq(rr[r].got[k][i], want, "%s, %d ranks: rank %d, round %d, element %d: %g, not %g",
                             tensor_dtype_name(dt), n, r, k, i, rr[r].got[k][i], want);
            }
    }
    cr_expect_eq(comm_dev_missing(c), -1);
    comm_dev_free(c);
}

TestSuite(comm_dev, .timeout = 120);

Test(comm_dev, one_rank_is_a_world_of_its_own)
{
    expect_sums(1, TENSOR_F64);
}

Test(comm_dev, two_ranks_sum_float64_buffers)
{
    expect_sums(2, TENSOR_F64);
}

Test(comm_dev, three_ranks_sum_float32_buffers)
{
    expect_sums(3, TENSOR_F32);
}

Test(comm_dev, a_rank_that_never_comes_times_its_peer_out_naming_it)
{
    gpus_or_skip(1);   /* the absent rank needs no GPU */
    struct comm_dev *c;
    struct err e = {0};
    cr_assert_eq(comm_dev_new(2, &c, &e), 0, "%s", e.msg);
    comm_dev_set_timeout(c, 0.5);
    static struct rank_run rr[1];
    run_world(c, 1, TENSOR_F64, rr);
    cr_expect_eq(rr[0].e.code, ERR_DEVICE, "rank 0: %d %s", rr[0].e.code, rr[0].e.msg);
    cr_expect(strstr(rr[0].e.msg, "no word from replica 1"), "%s", rr[0].e.msg);
    cr_expect_eq(comm_dev_missing(c), 1);
    comm_dev_free(c);
}

Test(comm_dev, an_abort_releases_a_rank_waiting_without_a_timeout)
{
    gpus_or_skip(1);
    struct comm_dev *c;
    struct err e = {0};
    cr_assert_eq(comm_dev_new(2, &c, &e), 0, "%s", e.msg);
    static struct rank_run rr[1];
    rr[0] = (struct rank_run){.c = c, .rank = 0, .dt = TENSOR_F64};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, rank_main, &rr[0]), 0);
    comm_dev_abort(c, "replica 1 stopped");   /* before or while rank 0 waits: the same outcome */
    pthread_join(th, NULL);
    cr_expect_eq(rr[0].e.code, ERR_CANCELLED, "rank 0: %d %s", rr[0].e.code, rr[0].e.msg);
    cr_expect(strstr(rr[0].e.msg, "replica 1 stopped"), "%s", rr[0].e.msg);
    cr_expect_eq(comm_dev_missing(c), -1);
    comm_dev_free(c);
}
