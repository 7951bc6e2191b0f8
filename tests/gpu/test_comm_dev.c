/*
 * test_comm_dev.c — comm/'s all-reduce of device buffers (comm.h's comm_dev, NCCL): N ranks on
 * N GPUs, each a thread with its own CUDA backend, get the sum of their buffers in float64 and
 * float32, over several collectives of one world (one rank is a world too); a rank that
 * never comes makes its peer's wait time out, naming it; an abort releases a waiting rank. Ranks
 * of two processes (one GPU each) meet by the id one of them made (comm_dev_new_span), and one
 * whose peer process never comes times out, saying the world's all-reduce did not finish.
 * A buffer's buckets, each queued without waiting (a rank queues all of its before its peer
 * queues any), sum to its whole sum; a peer that aborts after its first bucket releases a rank
 * waiting for all of its.
 * Skips with fewer GPUs than the test needs (one GPU runs all but the sums of 2 and 3). In the gpu-emu suite over the emulated runtime and NCCL (TRAIND_EMU_DEVICES=4).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

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
    int rank;                    /* the world's, and its GPU */
    int at;                      /* its rank in c: rank, but in a world of several processes */
    enum tensor_dtype dt;
    double got[ROUNDS][COUNT];   /* what the rank's buffer held after each all-reduce */
    struct err e;
    bool late;                   /* its world timed out (comm_dev_timed_out) */
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
            comm_dev_allreduce(rr->c, rr->at, be, dev, COUNT, rr->dt, &rr->e) ||
            be->to_host(be, host, dev, COUNT * size, &rr->e))
            break;
        for (int i = 0; i < COUNT; i++)
            rr->got[k][i] = rr->dt == TENSOR_F64 ? ((double *)host)[i] : ((float *)host)[i];
    }
out:
    if (be) {
        comm_dev_leave(rr->c, rr->at);
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
        rr[r] = (struct rank_run){.c = c, .rank = r, .at = r, .dt = dt};
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
    rr[0] = (struct rank_run){.c = c, .rank = 0, .at = 0, .dt = TENSOR_F64};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, rank_main, &rr[0]), 0);
    comm_dev_abort(c, "replica 1 stopped");   /* before or while rank 0 waits: the same outcome */
    pthread_join(th, NULL);
    cr_expect_eq(rr[0].e.code, ERR_CANCELLED, "rank 0: %d %s", rr[0].e.code, rr[0].e.msg);
    cr_expect(strstr(rr[0].e.msg, "replica 1 stopped"), "%s", rr[0].e.msg);
    cr_expect_eq(comm_dev_missing(c), -1);
    comm_dev_free(c);
}

/*
 * A gradient's buckets (comm_dev_allreduce_start, then comm_dev_allreduce_end): a rank sums
 * its buffer whole, then the same values again in buckets of BUCKET elements from the tail,
 * as replica_backward cuts them; or queues abort_after buckets and aborts the world.
 */
#define BUCKET 300

struct bucket_run {
    struct comm_dev *c;
    int rank;
    int abort_after;             /* buckets queued before the rank aborts; -1: it does not (-2: nor sums whole) */
    double whole[COUNT], buckets[COUNT];
    int buckets_queued;
    struct err e, end;           /* the first failure, and comm_dev_allreduce_end's */
    atomic_bool *wait_for;       /* not NULL: queues its buckets only once this is true */
    atomic_bool *queued_all;     /* not NULL: set once it has queued them */
};

/* Rank r's element i: thirds and sevenths, whose sums round, so their order shows in the bits. */
static double inexact(int r, int i)
{
    return 1.0 / (3 + r) + (double)i * (r + 1) / 7.0;
}

/* Queues rank br's buckets of dev, tail first, then waits for them (unless it aborts first). */
static void queue_buckets(struct bucket_run *br, const struct backend *be, double *dev)
{
    for (int i = 0; br->wait_for && !atomic_load(br->wait_for) && i < 20000; i++)
        usleep(1000);   /* 20 s at most: a peer that never says so fails the test by its sums */
    for (int hi = COUNT; hi > 0; hi -= BUCKET) {
        int lo = hi > BUCKET ? hi - BUCKET : 0;
        if (br->buckets_queued == br->abort_after) {
            comm_dev_abort(br->c, "replica 1 failed mid-bucket");
            break;
        }
        if (comm_dev_allreduce_start(br->c, br->rank, be, dev + lo, (size_t)(hi - lo), TENSOR_F64, &br->e))
            break;
        br->buckets_queued++;
    }
    if (br->queued_all)
        atomic_store(br->queued_all, true);
    comm_dev_allreduce_end(br->c, br->rank, be, &br->end);
}

static void *bucket_rank_main(void *arg)
{
    struct bucket_run *br = arg;
    const struct backend *be = NULL;
    double *host = malloc(COUNT * sizeof *host), *dev = NULL;
    if (!host || be_cuda_factory()->create(br->rank, &be, &br->e))
        goto out;
    if (!(dev = be->alloc(be, COUNT * sizeof *dev, &br->e)))
        goto out;
    for (int i = 0; i < COUNT; i++)
        host[i] = inexact(br->rank, i);
    if (br->abort_after == -1 && (be->from_host(be, dev, host, COUNT * sizeof *dev, &br->e) ||
                                comm_dev_allreduce(br->c, br->rank, be, dev, COUNT, TENSOR_F64, &br->e) ||
                                be->to_host(be, br->whole, dev, COUNT * sizeof *dev, &br->e)))
        goto out;
    if (be->from_host(be, dev, host, COUNT * sizeof *dev, &br->e))
        goto out;
    queue_buckets(br, be, dev);
    if (!br->e.code && !br->end.code)
        be->to_host(be, br->buckets, dev, COUNT * sizeof *dev, &br->e);
out:
    if (be) {
        comm_dev_leave(br->c, br->rank);
        if (dev)
            be->free(be, dev);
        be_cuda_factory()->destroy(be);
    }
    free(host);
    return NULL;
}

static void run_bucket_world(struct comm_dev *c, int n, struct bucket_run *br)
{
    pthread_t th[8];
    for (int r = 0; r < n; r++) {
        br[r].c = c;
        br[r].rank = r;
        cr_assert_eq(pthread_create(&th[r], NULL, bucket_rank_main, &br[r]), 0);
    }
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);
}

/*
 * Bit for bit the whole buffer's sum, on the emulation, whose NCCL sums each element in rank
 * order wherever it lies. A real NCCL's ring starts each chunk's sum at another rank, so with
 * 3 ranks or more the order, and the last bits, may change with the cut (2 ranks commute).
 */
Test(comm_dev, buckets_queued_one_after_another_sum_as_the_whole_buffer_does)
{
    int n = 3;
    gpus_or_skip(n);
    struct comm_dev *c;
    struct err e = {0};
    cr_assert_eq(comm_dev_new(n, &c, &e), 0, "%s", e.msg);
    comm_dev_set_timeout(c, 60);
    static struct bucket_run br[3];
    for (int r = 0; r < n; r++)
        br[r] = (struct bucket_run){.abort_after = -1};
    run_bucket_world(c, n, br);
    for (int r = 0; r < n; r++) {
        cr_assert_eq(br[r].e.code, ERR_OK, "rank %d: %s", r, br[r].e.msg);
        cr_assert_eq(br[r].end.code, ERR_OK, "rank %d: %s", r, br[r].end.msg);
        cr_expect_eq(br[r].buckets_queued, (COUNT + BUCKET - 1) / BUCKET);
        for (int i = 0; i < COUNT; i++) {
            double want = (inexact(0, i) + inexact(1, i)) + inexact(2, i);   /* the emulation's order */
            cr_assert(memcmp(&br[r].buckets[i], &br[r].whole[i], sizeof want) == 0,
                      "rank %d, element %d: %.17g in buckets, %.17g whole", r, i, br[r].buckets[i], br[r].whole[i]);
            cr_assert(fabs(br[r].whole[i] - want) <= 1e-12 * fabs(want), "rank %d, element %d: %.17g, not %.17g",
                      r, i, br[r].whole[i], want);
        }
    }
    comm_dev_free(c);
}

/*
 * Queuing does not wait for the peers: rank 0 queues all its buckets before rank 1 queues any
 * (rank 1 waits for word that it has), and both get the sums. A queue that waited for each
 * bucket's sum would wait for rank 1 until the timeout.
 */
Test(comm_dev, a_rank_queues_all_its_buckets_before_its_peer_queues_any)
{
    gpus_or_skip(2);
    struct comm_dev *c;
    struct err e = {0};
    cr_assert_eq(comm_dev_new(2, &c, &e), 0, "%s", e.msg);
    comm_dev_set_timeout(c, 10);
    static atomic_bool done_queuing;
    atomic_init(&done_queuing, false);
    static struct bucket_run br[2];
    br[0] = (struct bucket_run){.abort_after = -1, .queued_all = &done_queuing};
    br[1] = (struct bucket_run){.abort_after = -1, .wait_for = &done_queuing};
    run_bucket_world(c, 2, br);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(br[r].e.code, ERR_OK, "rank %d: %s", r, br[r].e.msg);
        cr_assert_eq(br[r].end.code, ERR_OK, "rank %d: %s", r, br[r].end.msg);
        for (int i = 0; i < COUNT; i++)
            cr_assert(memcmp(&br[r].buckets[i], &br[r].whole[i], sizeof br[r].whole[i]) == 0,
                      "rank %d, element %d: %.17g in buckets, %.17g whole", r, i, br[r].buckets[i], br[r].whole[i]);
    }
    comm_dev_free(c);
}

/* Rank 1 queues one bucket and aborts: rank 0, waiting for its buckets without a timeout, is released. */
Test(comm_dev, a_peer_that_aborts_mid_bucket_releases_a_rank_waiting_for_its_buckets)
{
    gpus_or_skip(2);
    struct comm_dev *c;
    struct err e = {0};
    cr_assert_eq(comm_dev_new(2, &c, &e), 0, "%s", e.msg);
    static struct bucket_run br[2];
    br[0] = (struct bucket_run){.abort_after = -2};   /* never aborts, and skips the whole sum */
    br[1] = (struct bucket_run){.abort_after = 1};
    run_bucket_world(c, 2, br);
    /* Rank 0 fails where the abort finds it: queuing a bucket, or (mostly) waiting for them. */
    const struct err *r0 = br[0].e.code ? &br[0].e : &br[0].end;
    cr_expect_eq(r0->code, ERR_CANCELLED, "rank 0: %d %s", r0->code, r0->msg);
    cr_expect(strstr(r0->msg, "replica 1 failed mid-bucket"), "%s", r0->msg);
    /* Rank 1's own bucket may have completed before its abort: its wait's outcome is not the point. */
    cr_expect_eq(br[1].e.code, ERR_OK, "rank 1 queuing its bucket: %s", br[1].e.msg);
    cr_expect_eq(br[1].buckets_queued, 1);
    cr_expect_eq(comm_dev_missing(c), -1);
    comm_dev_free(c);
}

/* This process's one rank, rank me of a world of 2 joined by id: its outcome in rr. */
static void run_span_rank(const unsigned char *id, int me, double timeout_s, struct rank_run *rr)
{
    struct comm_dev *c;
    *rr = (struct rank_run){.rank = me, .at = 0, .dt = TENSOR_F64};
    if (comm_dev_new_span(1, me, 2, id, NULL, &c, &rr->e))
        return;
    comm_dev_set_timeout(c, timeout_s);
    rr->c = c;
    rank_main(rr);
    rr->late = comm_dev_timed_out(c);
    comm_dev_free(c);
}

/* Whether rr holds the sum of ranks 0 and 1's values in every round. */
static bool holds_the_sum(const struct rank_run *rr)
{
    for (int k = 0; k < ROUNDS; k++)
        for (int i = 0; i < COUNT; i++)
            if (rr->e.code || rr->got[k][i] != value(0, i, k) + value(1, i, k))
                return false;
    return true;
}

Test(comm_dev, ranks_of_two_processes_meet_by_the_id_one_made)
{
    gpus_or_skip(2);
    unsigned char id[COMM_DEV_ID_BYTES];
    struct err e = {0};
    cr_assert_eq(comm_dev_make_id(id, &e), 0, "%s", e.msg);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    static struct rank_run rr;
    run_span_rank(id, pid == 0 ? 1 : 0, 60, &rr);
    if (pid == 0)
        _exit(holds_the_sum(&rr) ? 0 : 1);
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_expect_eq(rr.e.code, ERR_OK, "rank 0: %s", rr.e.msg);
    cr_expect(holds_the_sum(&rr), "rank 0 does not hold the sum of both processes' buffers");
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 1's process: status %d", st);
}

Test(comm_dev, a_peer_process_that_never_comes_times_the_world_out)
{
    gpus_or_skip(1);
    unsigned char id[COMM_DEV_ID_BYTES];
    struct err e = {0};
    cr_assert_eq(comm_dev_make_id(id, &e), 0, "%s", e.msg);
    static struct rank_run rr;
    run_span_rank(id, 0, 0.5, &rr);
    cr_expect_eq(rr.e.code, ERR_DEVICE, "rank 0: %d %s", rr.e.code, rr.e.msg);
    cr_expect(strstr(rr.e.msg, "an all-reduce of 2 GPUs did not finish"), "%s", rr.e.msg);
    cr_expect(rr.late, "comm_dev_timed_out is false");
}
