/*
 * test_mpi_gpu.c — GPU replicas across the ranks of a world under mpirun (mpi_world.c), in the
 * gpu-emu suite only (tests/gpu/meson.build), on traind-emu with TRAIND_EMU_DEVICES GPUs a rank:
 * a job's GPU replicas span both ranks, their gradients summed by one emulated NCCL communicator
 * of every rank's GPUs (tests/gpu/emu/emu_nccl.cpp meets processes by the unique id rank 0
 * sends), and report one replica's losses; GET /devices and /jobs/{id}/replicas show both ranks'
 * GPUs; their gradient in buckets has the losses of it whole; more GPU replicas than the
 * world's GPUs are refused; a follower hung while GPU replicas wait for it inside NCCL sends
 * the job back to the queue, to go on once it answers again; paused, they let go of every
 * rank's GPUs and, resumed, end with one replica's losses.
 *
 * Needs mpirun and a traind built with MPI: skipped without them, but under CI=true it fails,
 * saying what to install.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "jobs.h"
#include "mpi_world.h"

/* The emulated GPUs a rank has (TRAIND_EMU_DEVICES); skips where there are none (not traind-emu). */
static int emu_gpus(void)
{
    const char *v = getenv("TRAIND_EMU_DEVICES");
    int n = v ? atoi(v) : 0;
    if (n < 2)
        cr_skip_test("no TRAIND_EMU_DEVICES of 2 or more: these run on traind-emu (meson test --suite gpu-emu)");
    return n;
}

static void setup_gpu(void)
{
    world_setup();
    W.gpus = "all";
}

TestSuite(mpi_gpu, .init = setup_gpu, .fini = world_teardown, .timeout = 240);

/* GET /devices lists each rank's GPUs, named as its workers, and says NCCL loads there. */
static void expect_every_ranks_gpus(int gpus)
{
    json_t *d = get_json(&W.d, "/devices", 200);
    json_t *ranks = json_object_get(d, "ranks");
    cr_assert_eq(json_array_size(ranks), 2, "GET /devices: %zu ranks, not 2", json_array_size(ranks));
    for (size_t r = 0; r < 2; r++) {
        json_t *o = json_array_get(ranks, r), *list = json_object_get(o, "gpus");
        cr_expect(json_is_true(json_object_get(o, "nccl")), "rank %zu: no NCCL", r);
        cr_expect_eq(json_array_size(list), (size_t)gpus, "rank %zu: %zu GPUs, not %d", r, json_array_size(list), gpus);
        for (size_t g = 0; g < json_array_size(list); g++) {
            char want[32];
            snprintf(want, sizeof want, r ? "rank%zu/cuda:%zu" : "cuda:%zu", r ? r : g, g);
            cr_expect_str_eq(json_string_value(json_object_get(json_array_get(list, g), "device")), want);
        }
        size_t workers = json_array_size(json_object_get(o, "workers"));
        cr_expect_eq(workers, (size_t)gpus + 1, "rank %zu: %zu workers, not its CPU and %d GPUs", r, workers, gpus);
    }
    json_decref(d);
}

/* A long job of n GPU replicas, while it runs: each on the GPU of the rank expected (rank 0's first). */
static void expect_replicas_on_both_ranks(int n, int gpus)
{
    char id[64], path[128];
    submit_job(&W.d, world_spec_on(false, n, 10000000, "auto", ""), id, sizeof id);
    snprintf(path, sizeof path, "/jobs/%s/replicas", id);
    size_t seen = 0;
    json_int_t its = 0;
    for (double t0 = now_s(); its == 0 && now_s() - t0 < 60; sleep_ms(50)) {
        json_t *r = get_json(&W.d, path, 200);
        json_t *list = json_object_get(r, "replicas");
        seen = json_array_size(list);
        its = json_integer_value(json_object_get(json_array_get(list, seen ? seen - 1 : 0), "iterations"));
        for (size_t i = 0; its > 0 && i < seen; i++) {
            char want[32];
            snprintf(want, sizeof want, (int)i < gpus ? "cuda:%zu" : "rank1/cuda:%zu", (int)i < gpus ? i : i - (size_t)gpus);
            cr_expect_str_eq(json_string_value(json_object_get(json_array_get(list, i), "device")), want,
                             "replica %zu of %d", i, n);
        }
        cr_expect(seen == 0 || seen == (size_t)n, "GET %s: %zu replicas, not %d", path, seen, n);
        json_decref(r);
    }
    cr_expect_gt(its, 0, "GET %s never showed the last replica's iterations", path);
    job_action(&W.d, id, "cancel", 202);
    wait_job_state(&W.d, id, "cancelled", 60);
}

/*
 * The linear and the MLP job as GPU replicas on both ranks (all of rank 0's GPUs and one, or
 * all, of rank 1's), against the same job as one replica on cuda:0: the reference is that
 * run's losses, in which no all-reduce takes part.
 */
Test(mpi_gpu, gpu_replicas_across_two_ranks_train_as_one)
{
    int gpus = emu_gpus();
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    expect_every_ranks_gpus(gpus);
    expect_replicas_on_both_ranks(2 * gpus, gpus);
    double one[ITERATIONS], many[ITERATIONS];
    char what[64];
    for (int mlp = 0; mlp <= 1; mlp++) {
        world_losses_of(world_spec_on(mlp, 1, ITERATIONS, "cuda:0", ""), one, ITERATIONS);
        for (int n = gpus + 1; n <= 2 * gpus; n += gpus - 1) {
            char id[64];
            submit_job(&W.d, world_spec_on(mlp, n, ITERATIONS, "auto", ""), id, sizeof id);
            json_t *j = wait_job_done(&W.d, id, 120);
            cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                             json_string_value(json_object_get(json_object_get(j, "error"), "message")));
            json_decref(j);
            job_losses(&W.d, id, many, ITERATIONS);
            snprintf(what, sizeof what, "%s as %d GPU replicas on 2 ranks", mlp ? "MLP+Adam" : "linear", n);
            world_expect_close(many, one, ITERATIONS, mlp ? 1e-8 : 1e-9, what);
        }
    }
    world_end_clean();
}

/*
 * The MLP as GPU replicas on both ranks, its gradient in buckets (each queued on NCCL's
 * communicator of all of them while backward runs), against it whole: the same losses to the
 * bit on the emulation, whose NCCL sums in rank order wherever an element lies, and one
 * replica's to rounding.
 */
Test(mpi_gpu, gpu_replicas_across_two_ranks_in_buckets_train_as_with_the_gradient_whole)
{
    int gpus = emu_gpus();
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    double one[ITERATIONS], whole[ITERATIONS], bucketed[ITERATIONS];
    world_losses_of(world_spec_on(true, 1, ITERATIONS, "cuda:0", ""), one, ITERATIONS);
    world_losses_of(world_spec_on(true, 2 * gpus, ITERATIONS, "auto", ",\"replica_bucket_mb\":0"), whole, ITERATIONS);
    world_losses_of(world_spec_on(true, 2 * gpus, ITERATIONS, "auto", BUCKETS), bucketed, ITERATIONS);
    expect_bucketed_as_whole(bucketed, whole, ITERATIONS);
    world_expect_close(bucketed, one, ITERATIONS, 1e-8, "MLP+Adam as GPU replicas on 2 ranks, in buckets");
    world_end_clean();
}

Test(mpi_gpu, more_gpu_replicas_than_the_world_has_are_refused)
{
    int gpus = emu_gpus();
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    struct http_reply r;
    cr_assert(http(&W.d, "POST", "/jobs", "application/json", world_spec_on(false, 2 * gpus + 1, ITERATIONS, "auto", ""), &r));
    char says[96];
    snprintf(says, sizeof says, "%d replicas, but the world has %d GPUs", 2 * gpus + 1, 2 * gpus);
    cr_expect_eq(r.status, 400, "%s", r.body);
    cr_expect(strstr(r.body, says), "the reply does not say \"%s\": %s", says, r.body);
    http_reply_free(&r);
    world_end_clean();
}

#define GPU_LONG_ITERATIONS 40

/*
 * A follower that stops answering while GPU replicas wait for it inside NCCL: rank 0's wait
 * passes --allreduce-timeout, the job goes back to the queue and, once the follower answers
 * again, on from its checkpoint with the losses of one replica never interrupted.
 */
Test(mpi_gpu, hung_follower_sends_the_gpu_job_back_to_the_queue)
{
    int gpus = emu_gpus();
    /* 5 s, not the CPU tests' 2: on a busy 2-core machine an emulated GPU's step (its kernels'
     * threads many) or rank 0's checkpoint write, which its peers wait for, can take seconds, and
     * a wait past the deadline sends the job back, to the checkpoint before: round and round. */
    static const char *const hb[] = {"--allreduce-timeout", "5", NULL};
    cr_assert(world_start_on(2, 1, hb, NULL), "the world did not start (see %s/traind.log)", W.d.dir);
    char id[64];
    submit_job(&W.d, world_spec_on(false, 2 * gpus, GPU_LONG_ITERATIONS, "auto", ",\"checkpoint_every\":10"), id, sizeof id);
    wait_job_iterations(&W.d, id, 10);
    world_hang_follower(id);
    world_expect_succeeded(id, 120);
    double resumed[GPU_LONG_ITERATIONS], one[GPU_LONG_ITERATIONS];
    job_losses(&W.d, id, resumed, GPU_LONG_ITERATIONS);
    world_losses_of(world_spec_on(false, 1, GPU_LONG_ITERATIONS, "cuda:0", ""), one, GPU_LONG_ITERATIONS);
    world_expect_close(resumed, one, GPU_LONG_ITERATIONS, 1e-9, "linear, GPU replicas resumed after a hung follower");
    world_end_clean();
}

#define GPU_PAUSE_ITERATIONS 12   /* into a second epoch of 8 batches; the emulated GPUs are slow */

/*
 * GPU replicas on both ranks paused mid-run: their NCCL communicator ends with the run, every
 * rank's GPUs are let go and nothing trains while the job is paused; resumed, the replicas join
 * a new communicator and end with the losses of one replica run straight through.
 */
Test(mpi_gpu, paused_and_resumed_gpu_replicas_across_ranks_go_on_as_if_never_stopped)
{
    int gpus = emu_gpus();
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    double one[GPU_PAUSE_ITERATIONS], loss[GPU_PAUSE_ITERATIONS];
    world_losses_of(world_spec_on(false, 1, GPU_PAUSE_ITERATIONS, "cuda:0", ""), one, GPU_PAUSE_ITERATIONS);
    world_paused_run(world_spec_on(false, 2 * gpus, GPU_PAUSE_ITERATIONS, "auto", ""), 3, GPU_PAUSE_ITERATIONS, loss);
    world_expect_close(loss, one, GPU_PAUSE_ITERATIONS, 1e-9, "linear as GPU replicas on 2 ranks, paused and resumed");
    world_end_clean();
}
