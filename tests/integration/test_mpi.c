/*
 * test_mpi.c — traind as a world of processes under mpirun (Open MPI) on loopback. With one CPU
 * worker a rank a job of N replicas spans N ranks: GET /devices lists every rank; the seed's
 * linear job and an MLP with Adam, as replicas across 2 and 3 ranks, report the losses of the
 * same job as one replica (the reference: the 1-replica run, independent of the all-reduce), as
 * they do with two replicas a rank, and with the MLP's gradient in buckets those of it whole, to
 * the bit, and the linear job's eval_loss on data.test is one replica's; a follower killed
 * mid-job ends the world, whose next start on the same state dir finishes the job with the
 * losses of a run never interrupted; a follower that hangs, its gradient whole or in buckets,
 * sends the job back to the queue, to go on once it answers again; a replica failing on a
 * follower fails the job with its error; init.from's parameters reach the followers; a
 * follower's replicas' figures reach GET /jobs/{id}/replicas; a job paused across ranks frees
 * every rank's workers and, resumed, has one replica's losses; SIGUSR1 stops the world cleanly;
 * rank 0 speaks to systemd for mpirun. The world itself: mpi_world.c; GPU replicas across
 * ranks: test_mpi_gpu.c.
 *
 * Needs mpirun and a traind built with MPI: skipped without them, but under CI=true it fails,
 * saying what to install.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"
#include "mpi_world.h"

TestSuite(mpi, .init = world_setup, .fini = world_teardown, .timeout = 240);

/* spec (one of spec_of's) with data.test, a test set of 301 rows whose 97-row batches split unevenly. */
static const char *with_test(const char *spec)
{
    char test[400];
    snprintf(test, sizeof test, "\"test\":\"%s/reptest/part*.csv\"", W.d.dir);
    return spec_with_data(spec, test);
}

/* The losses of spec's job, and its eval_loss column (NaN where none was due) into eval. */
static void losses_and_evals_of(const char *spec, double *loss, double *eval, int n)
{
    char id[64];
    submit_job(&W.d, spec, id, sizeof id);
    world_expect_succeeded(id, 120);
    job_losses(&W.d, id, loss, (size_t)n);
    job_column(&W.d, id, "eval_loss", eval, (size_t)n);
}

/*
 * On a world of np ranks: the linear and the MLP job as np replicas, one a rank, against one
 * replica; the linear job with data.test, whose eval_loss (each rank evaluating its share of
 * every test batch) is one replica's too.
 */
static void expect_spanning_like_one(int np)
{
    cr_assert(gen_dctaxi_seed(&W.d, "reptest", 301, 2, 1));
    cr_assert(world_start(np), "the world of %d ranks did not start (see %s/traind.log)", np, W.d.dir);
    double one[ITERATIONS], many[ITERATIONS], eval_one[ITERATIONS], eval_many[ITERATIONS];
    char what[64];
    for (int mlp = 0; mlp <= 1; mlp++) {
        if (mlp) {
            world_losses_of(world_spec_of(mlp, 1, ITERATIONS, ""), one, ITERATIONS);
            world_losses_of(world_spec_of(mlp, np, ITERATIONS, ""), many, ITERATIONS);
        } else {
            losses_and_evals_of(with_test(world_spec_of(mlp, 1, ITERATIONS, ",\"eval_every\":5")), one, eval_one,
                                ITERATIONS);
            losses_and_evals_of(with_test(world_spec_of(mlp, np, ITERATIONS, ",\"eval_every\":5")), many, eval_many,
                                ITERATIONS);
        }
        snprintf(what, sizeof what, "%s as %d replicas on %d ranks", mlp ? "MLP+Adam" : "linear", np, np);
        world_expect_close(many, one, ITERATIONS, mlp ? 1e-8 : 1e-9, what);
    }
    for (int i = 0; i < ITERATIONS; i++) {
        bool due = (i + 1) % 5 == 0 || i == ITERATIONS - 1;
        cr_expect(due ? fabs(eval_many[i] - eval_one[i]) <= 1e-9 * fabs(eval_one[i])
                      : isnan(eval_many[i]) && isnan(eval_one[i]),
                  "linear as %d replicas on %d ranks: eval_loss %.17g after iteration %d, one replica's %.17g",
                  np, np, eval_many[i], i, eval_one[i]);
    }
}

Test(mpi, devices_lists_every_rank_with_its_host)
{
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    json_t *d = get_json(&W.d, "/devices", 200);
    json_t *ranks = json_object_get(d, "ranks");
    cr_assert_eq(json_array_size(ranks), 2, "GET /devices: %zu ranks, not 2", json_array_size(ranks));
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    for (size_t r = 0; r < 2; r++) {
        json_t *o = json_array_get(ranks, r);
        cr_expect_eq(json_integer_value(json_object_get(o, "rank")), (json_int_t)r);
        cr_expect_str_eq(json_string_value(json_object_get(o, "host")), host);
        json_t *workers = json_object_get(o, "workers");
        cr_expect_eq(json_array_size(workers), 1, "rank %zu: %zu workers, not 1", r, json_array_size(workers));
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(workers, 0), "device")),
                         r == 0 ? "cpu" : "rank1/cpu:0");
    }
    json_decref(d);
    world_end_clean();
}

Test(mpi, replicas_across_two_ranks_train_as_one)
{
    expect_spanning_like_one(2);
    world_end_clean();
}

Test(mpi, replicas_across_three_ranks_train_as_one)
{
    expect_spanning_like_one(3);
    world_end_clean();
}

/* Two workers a rank: each rank sums its two replicas first, then the ranks' sums are added. */
Test(mpi, replicas_two_a_rank_train_as_one)
{
    cr_assert(world_start_with(2, 2), "the world did not start (see %s/traind.log)", W.d.dir);
    double one[ITERATIONS], many[ITERATIONS];
    world_losses_of(world_spec_of(false, 1, ITERATIONS, ""), one, ITERATIONS);
    for (int n = 3; n <= 4; n++) {
        char what[64];
        world_losses_of(world_spec_of(false, n, ITERATIONS, ""), many, ITERATIONS);
        snprintf(what, sizeof what, "linear as %d replicas on 2 ranks", n);
        world_expect_close(many, one, ITERATIONS, 1e-9, what);
    }
    world_end_clean();
}

/*
 * Replicas job's replicas, once each has a step (a follower's as it reports them): each shows
 * the count of buckets its gradient took in a step.
 */
static void expect_buckets_shown(const char *id, int replicas, int buckets)
{
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s/replicas", id);
    json_t *list = NULL, *body = NULL;
    for (double t0 = now_s(); now_s() - t0 < 60; sleep_ms(50)) {
        json_decref(body);
        body = get_json(&W.d, path, 200);
        list = json_object_get(body, "replicas");
        int stepped = 0;
        for (int r = 0; r < replicas; r++)
            stepped += json_integer_value(json_object_get(json_array_get(list, (size_t)r), "iterations")) > 0 &&
                       json_integer_value(json_object_get(json_array_get(list, (size_t)r), "buckets")) > 0;
        if (stepped == replicas)
            break;
    }
    cr_assert_eq(json_array_size(list), (size_t)replicas, "GET %s: %zu replicas", path, json_array_size(list));
    for (int r = 0; r < replicas; r++) {
        json_t *x = json_array_get(list, (size_t)r);
        cr_expect_eq(json_integer_value(json_object_get(x, "buckets")), buckets, "replica %d (%s): %lld buckets", r,
                     json_string_value(json_object_get(x, "device")),
                     (long long)json_integer_value(json_object_get(x, "buckets")));
        cr_expect_geq(json_number_value(json_object_get(x, "allreduce_hidden_seconds")), 0);
    }
    json_decref(body);
}

/*
 * Two workers a rank, the MLP as 4 replicas across 2 ranks: its gradient in 3 buckets, each
 * summed in each rank and then across the ranks while backward runs, gives the losses of the
 * gradient all-reduced whole (replica_bucket_mb 0), bit for bit, and so one replica's to 1e-8;
 * GET /jobs/{id}/replicas counts 3 buckets on both ranks.
 */
Test(mpi, an_mlp_in_buckets_across_ranks_has_the_losses_of_its_gradient_whole)
{
    cr_assert(world_start_with(2, 2), "the world did not start (see %s/traind.log)", W.d.dir);
    double one[ITERATIONS], whole[ITERATIONS], bucketed[ITERATIONS];
    world_losses_of(world_spec_of(true, 1, ITERATIONS, ""), one, ITERATIONS);
    world_losses_of(world_spec_of(true, 4, ITERATIONS, ",\"replica_bucket_mb\":0"), whole, ITERATIONS);
    world_losses_of(world_spec_of(true, 4, ITERATIONS, BUCKETS), bucketed, ITERATIONS);
    expect_bucketed_as_whole(bucketed, whole, ITERATIONS);
    world_expect_close(bucketed, one, ITERATIONS, 1e-8, "MLP+Adam as 4 replicas on 2 ranks, in buckets");
    char id[64];
    submit_job(&W.d, world_spec_of(true, 4, 10000000, BUCKETS), id, sizeof id);
    expect_buckets_shown(id, 4, 3);
    job_action(&W.d, id, "cancel", 202);
    wait_job_state(&W.d, id, "cancelled", 60);
    world_end_clean();
}

/*
 * A follower that stops answering while the gradient goes in buckets: rank 0's comm thread,
 * waiting for the follower's part of a bucket, gives up at the deadline and the job goes back
 * to the queue, as with the gradient whole; once the follower answers again the job runs again.
 */
Test(mpi, hung_follower_mid_bucket_sends_the_job_back_to_the_queue)
{
    static const char *const hb[] = {"--allreduce-timeout", "2", NULL};
    cr_assert(world_start_on(2, 1, hb, NULL), "the world did not start (see %s/traind.log)", W.d.dir);
    char id[64];
    submit_job(&W.d, world_spec_of(true, 2, 10000000, BUCKETS ",\"checkpoint_every\":100"), id, sizeof id);
    expect_buckets_shown(id, 2, 3);
    world_hang_follower(id);
    wait_job_state(&W.d, id, "running", 60);
    job_action(&W.d, id, "cancel", 202);
    wait_job_state(&W.d, id, "cancelled", 60);
    world_end_clean();
}

#define LONG_ITERATIONS 5000

/* Job id's losses, after its interruption, equal those of the same 2-replica job run straight through. */
static void expect_losses_of_an_uninterrupted_run(const char *id)
{
    static double resumed[LONG_ITERATIONS], straight[LONG_ITERATIONS];
    job_losses(&W.d, id, resumed, LONG_ITERATIONS);
    world_losses_of(world_spec_of(false, 2, LONG_ITERATIONS, ""), straight, LONG_ITERATIONS);
    for (int i = 0; i < LONG_ITERATIONS; i++)
        cr_expect(resumed[i] == straight[i], "iteration %d: resumed %.17g, uninterrupted %.17g", i, resumed[i],
                  straight[i]);
}

/*
 * A follower killed while the job trains (after a checkpoint) takes the world down; the next
 * start on the same state dir resumes the job, whose losses then equal those of the same job
 * trained without a stop, and every process of the first world is gone.
 */
Test(mpi, killed_follower_ends_the_world_and_the_job_resumes)
{
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    char id[64];
    submit_job(&W.d, world_spec_of(false, 2, LONG_ITERATIONS, ",\"checkpoint_every\":100"), id, sizeof id);
    wait_job_iterations(&W.d, id, 300);
    pid_t first[MAX_RANKS];
    memcpy(first, W.ranks, sizeof first);
    cr_assert_gt(first[1], 0, "rank 1's process was not found");
    kill(first[1], SIGKILL);
    int st = 0;
    pid_t got = 0;
    for (double t0 = now_s(); got == 0 && now_s() - t0 < 60; sleep_ms(20))
        got = waitpid(W.d.pid, &st, WNOHANG);
    cr_assert_eq(got, W.d.pid, "mpirun did not end after a rank was killed");
    W.d.pid = 0;
    for (double t0 = now_s(); !world_gone(first[0]) && now_s() - t0 < 30;)
        sleep_ms(20);
    cr_assert(world_gone(first[0]), "rank 0 (pid %d) outlived the world", (int)first[0]);

    cr_assert(world_start(2), "the world did not start again (see %s/traind.log)", W.d.dir);
    world_expect_succeeded(id, 120);
    cr_expect(daemon_log_contains(&W.d, "goes on from iteration"), "the job did not resume from a checkpoint");
    expect_losses_of_an_uninterrupted_run(id);
    world_end_clean();
}

/*
 * Two workers a rank, the linear job as 4 replicas across 2 ranks, paused mid-run: rank 0 stops
 * at a step with a checkpoint, the follower's replicas let go of their workers too and nothing
 * trains while it is paused; resumed, it ends with the losses of one replica run straight through.
 */
Test(mpi, paused_and_resumed_replicas_across_ranks_go_on_as_if_never_stopped)
{
    cr_assert(world_start_with(2, 2), "the world did not start (see %s/traind.log)", W.d.dir);
    static double one[LONG_ITERATIONS], loss[LONG_ITERATIONS];
    world_losses_of(world_spec_of(false, 1, LONG_ITERATIONS, ""), one, LONG_ITERATIONS);
    world_paused_run(world_spec_of(false, 4, LONG_ITERATIONS, ""), 100, LONG_ITERATIONS, loss);
    world_expect_close(loss, one, LONG_ITERATIONS, 1e-9, "linear as 4 replicas on 2 ranks, paused and resumed");
    world_end_clean();
}

/* While a job trains across ranks, GET /jobs/{id}/replicas shows the follower's replica's figures. */
Test(mpi, replicas_on_a_follower_report_their_figures)
{
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    char id[64], path[128];
    submit_job(&W.d, world_spec_of(false, 2, 10000000, ""), id, sizeof id);
    snprintf(path, sizeof path, "/jobs/%s/replicas", id);
    json_int_t its = 0;
    for (double t0 = now_s(); its == 0 && now_s() - t0 < 60; sleep_ms(50)) {
        json_t *r = get_json(&W.d, path, 200);
        json_t *one = json_array_get(json_object_get(r, "replicas"), 1);
        its = json_integer_value(json_object_get(one, "iterations"));
        if (its > 0) {
            cr_expect_str_eq(json_string_value(json_object_get(one, "device")), "rank1/cpu:0");
            cr_expect_gt(json_number_value(json_object_get(json_object_get(one, "step_seconds"), "median")), 0);
        }
        json_decref(r);
    }
    cr_expect_gt(its, 0, "GET %s never showed replica 1's iterations", path);
    job_action(&W.d, id, "cancel", 202);
    wait_job_state(&W.d, id, "cancelled", 60);
    world_end_clean();
}

/*
 * SIGUSR1 to mpirun stops the world as SIGTERM stops one traind: a running job stops at its
 * next step after a checkpoint, every rank exits 0, and the next start goes on with the job.
 */
Test(mpi, sigusr1_stops_the_world_and_the_job_goes_on_at_the_next_start)
{
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    char id[64];
    submit_job(&W.d, world_spec_of(false, 2, 10000000, ""), id, sizeof id);
    wait_job_iterations(&W.d, id, 100);
    int status = world_stop(60);
    cr_assert_eq(status, 0, "mpirun exited with status %d on SIGUSR1", status);
    cr_expect(daemon_log_contains(&W.d, "stopped for shutdown; it goes on from iteration"),
              "the job was not stopped at a step with a checkpoint");
    cr_assert(world_start(2), "the world did not start again (see %s/traind.log)", W.d.dir);
    wait_job_state(&W.d, id, "running", 60);
    job_action(&W.d, id, "cancel", 202);
    wait_job_state(&W.d, id, "cancelled", 60);
    world_end_clean();
}

/* A job starting from another's parameters (init.from) sends them to its replicas on other
 * ranks: across two ranks it trains as one replica from the same start. */
Test(mpi, init_from_reaches_the_replicas_on_other_ranks)
{
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    double first[ITERATIONS], one[ITERATIONS], many[ITERATIONS];
    char id[64], from[96];
    submit_job(&W.d, world_spec_of(false, 1, ITERATIONS, ""), id, sizeof id);
    json_decref(wait_job_done(&W.d, id, 120));
    job_losses(&W.d, id, first, ITERATIONS);
    snprintf(from, sizeof from, ",\"init\":{\"from\":\"%s\"}", id);
    world_losses_of(world_spec_of(false, 1, ITERATIONS, from), one, ITERATIONS);
    world_losses_of(world_spec_of(false, 2, ITERATIONS, from), many, ITERATIONS);
    cr_expect(one[0] < first[0], "init.from did not start where the first job ended");
    world_expect_close(many, one, ITERATIONS, 1e-9, "linear from another job's parameters, on 2 ranks");
    world_end_clean();
}

/*
 * A replica that fails on a follower (its --data-root does not hold the data) fails the job with
 * its own error, naming its rank, at once: rank 0 does not wait for a partial sum that never comes.
 */
Test(mpi, a_replica_failing_on_a_follower_fails_the_job_with_its_error)
{
    char other[300];
    snprintf(other, sizeof other, "%s/elsewhere", W.d.dir);
    cr_assert_eq(mkdir(other, 0700), 0);
    cr_assert(world_start_on(2, 1, NULL, other), "the world did not start (see %s/traind.log)", W.d.dir);
    char id[64];
    submit_job(&W.d, world_spec_of(false, 2, ITERATIONS, ""), id, sizeof id);
    char *msg = job_failure(&W.d, id, "auth_failed", 60);
    cr_expect(strstr(msg, "rank 1: ") && strstr(msg, "outside --data-root"), "the job failed with: %s", msg);
    free(msg);
    world_end_clean();
}

/*
 * A follower that stops answering (SIGSTOP) does not leave rank 0 waiting: past the deadline
 * (--allreduce-timeout) the job goes back to the queue; once the follower answers again
 * (SIGCONT) the job goes on from its checkpoint, with the losses of a run never interrupted.
 */
Test(mpi, hung_follower_sends_the_job_back_to_the_queue)
{
    static const char *const hb[] = {"--allreduce-timeout", "2", NULL};
    cr_assert(world_start_on(2, 1, hb, NULL), "the world did not start (see %s/traind.log)", W.d.dir);
    char id[64];
    submit_job(&W.d, world_spec_of(false, 2, LONG_ITERATIONS, ",\"checkpoint_every\":100"), id, sizeof id);
    wait_job_iterations(&W.d, id, 300);
    world_hang_follower(id);
    world_expect_succeeded(id, 120);
    expect_losses_of_an_uninterrupted_run(id);
    world_end_clean();
}

/* Under systemd (systemd/traind-mpi.service) mpirun is the main process: rank 0, its child,
 * says READY=1 once it listens and feeds the watchdog meant for mpirun. */
Test(mpi, rank_0_notifies_systemd_for_mpirun)
{
    snprintf(W.notify_path, sizeof W.notify_path, "%s/notify", W.d.dir);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    cr_assert_lt(strlen(W.notify_path), sizeof sa.sun_path);
    memcpy(sa.sun_path, W.notify_path, strlen(W.notify_path) + 1);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0, "bind %s: %m", W.notify_path);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    const char *want[] = {"READY=1", "WATCHDOG=1", "WATCHDOG=1"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char buf[256];
        ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
        cr_assert_gt(n, 0, "no notification (waiting for %s)", want[i]);
        buf[n] = '\0';
        cr_expect_str_eq(buf, want[i]);
    }
    close(fd);
    world_end_clean();
}

/* The unit that runs mpirun under systemd is one systemd accepts (where systemd-analyze is). */
Test(mpi, the_mpi_unit_file_verifies_without_a_word)
{
    if (system("command -v systemd-analyze >/dev/null 2>&1") != 0)
        cr_skip_test("systemd-analyze is not installed (apt-get install systemd); the unit is not checked");
    const char *unit = getenv("TRAIND_MPI_UNIT_FILE");
    cr_assert_not_null(unit, "meson sets TRAIND_MPI_UNIT_FILE");
    char cmd[1200], out[8192];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/traind-mpi.service' && systemd-analyze verify '%s/traind-mpi.service' 2>&1",
             unit, W.d.dir, W.d.dir);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    cr_expect_eq(rc, 0, "systemd-analyze verify failed: %s", out);
    cr_expect_eq(n, 0, "systemd-analyze verify said: %s", out);
}
