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
 * follower's replicas' figures reach GET /jobs/{id}/replicas; SIGUSR1 stops the world cleanly;
 * rank 0 speaks to systemd for mpirun.
 *
 * The mpi_gpu tests run in the gpu-emu suite only (tests/gpu/meson.build), on traind-emu with
 * TRAIND_EMU_DEVICES GPUs a rank: a job's GPU replicas span both ranks, their gradients summed
 * by one emulated NCCL communicator of every rank's GPUs (tests/gpu/emu/emu_nccl.cpp meets
 * processes by the unique id rank 0 sends), and report one replica's losses; GET /devices and
 * /jobs/{id}/replicas show both ranks' GPUs; more GPU replicas than the world's GPUs are
 * refused; a follower hung while GPU replicas wait for it inside NCCL sends the job back to the
 * queue, to go on once it answers again.
 *
 * Needs mpirun and a traind built with MPI: skipped without them, but under CI=true it fails,
 * saying what to install.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"

#define ITERATIONS 24
#define MAX_RANKS 4

struct world_proc {
    struct daemon_proc d;   /* d.pid: mpirun's */
    pid_t ranks[MAX_RANKS]; /* by rank, once seen */
};

static struct world_proc W;
static char notify_path[300];   /* set: mpirun runs as systemd would run it, with a watchdog */
static const char *gpus_flag = "none";   /* --gpus of every rank */

/* Skips the test without mpirun or a traind built with MPI; under CI=true fails instead. */
static void need_mpi(void)
{
    const char *mpirun = getenv("MPIRUN");
    const char *built = getenv("TRAIND_MPI");
    if (mpirun && *mpirun && built && strcmp(built, "1") == 0)
        return;
    const char *why = !(mpirun && *mpirun) ? "mpirun is missing" : "traind was built without MPI";
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0)
        cr_assert_fail("%s, and CI=true needs this test: apt-get install openmpi-bin libopenmpi-dev "
                       "(scripts/deps), then meson setup --reconfigure", why);
    cr_skip_test("%s: apt-get install openmpi-bin libopenmpi-dev (scripts/deps)", why);
}

/* The pid of mpirun's child of rank `rank` (OMPI_COMM_WORLD_RANK in its environment), or 0. */
static pid_t rank_pid(pid_t mpirun, int rank)
{
    DIR *dir = opendir("/proc");
    struct dirent *de;
    pid_t found = 0;
    char want[48];
    snprintf(want, sizeof want, "OMPI_COMM_WORLD_RANK=%d", rank);
    while (dir && !found && (de = readdir(dir))) {
        char path[300], buf[8192];
        int ppid = 0;
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fscanf(f, "%*d (%*[^)]) %*c %d", &ppid) != 1)
            ppid = 0;
        fclose(f);
        if (ppid != mpirun)
            continue;
        snprintf(path, sizeof path, "/proc/%s/environ", de->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t at = 0; at < n; at += strlen(buf + at) + 1)
            if (strcmp(buf + at, want) == 0)
                found = (pid_t)atoi(de->d_name);
    }
    if (dir)
        closedir(dir);
    return found;
}

/* Whether pid is gone (or a zombie nobody has reaped yet). */
static bool gone(pid_t pid)
{
    char path[64], st = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    if (fscanf(f, "%*d (%*[^)]) %c", &st) != 1)
        st = 0;
    fclose(f);
    return st == 'Z' || st == 'X';
}

/* mpirun -np np traind ... on loopback, workers CPU workers a rank; true once rank 0 listens. */
/* One of mpirun's app contexts: n ranks of traind with the test's flags, data below root. */
static size_t app(const char **argv, size_t at, const char *n, const char *root, const char *const *common,
                  const char *const *extra)
{
    argv[at++] = "-np";
    argv[at++] = n;
    argv[at++] = getenv("TRAIND_BIN");
    for (int i = 0; common[i]; i++)
        argv[at++] = common[i];
    argv[at++] = "--data-root";
    argv[at++] = root;
    for (int i = 0; extra && extra[i]; i++)
        argv[at++] = extra[i];
    return at;
}

/*
 * mpirun traind ... on loopback, np ranks of workers CPU workers, with extra flags (NULL-ended,
 * may be NULL); follower_root: the followers' --data-root, when not rank 0's. True once rank 0 listens.
 */
static bool world_start_on(int np, int workers, const char *const *extra, const char *follower_root)
{
    struct daemon_proc *d = &W.d;
    char port_file[300], log_file[300], state[300], npc[8], wc[8];
    snprintf(port_file, sizeof port_file, "%s/port", d->dir);
    snprintf(log_file, sizeof log_file, "%s/traind.log", d->dir);
    snprintf(npc, sizeof npc, "%d", follower_root ? np - 1 : np);
    snprintf(wc, sizeof wc, "%d", workers);
    daemon_state_dir(d, state, sizeof state);
    unlink(port_file);
    const char *const common[] = {"--listen", "127.0.0.1:0", "--port-file", port_file, "--state-dir", state,
                                  "--cpu-workers", wc, "--gpus", gpus_flag, "--log-level", "debug", NULL};
    const char *argv[80] = {getenv("MPIRUN"), "--oversubscribe", "--mca", "btl", "self,tcp",
                            "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo",
                            "--mca", "pml", "ob1", "--bind-to", "none"};
    size_t n = 16;
    if (follower_root) {   /* MPMD: rank 0, then the others with their own data root */
        n = app(argv, n, "1", d->dir, common, extra);
        argv[n++] = ":";
        n = app(argv, n, npc, follower_root, common, extra);
    } else {
        n = app(argv, n, npc, d->dir, common, extra);
    }
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* Open MPI refuses root (CI runs as root) unless told twice. */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        if (notify_path[0]) {   /* mpirun is the unit's main process: the watchdog is its */
            char self[24];
            snprintf(self, sizeof self, "%d", (int)getpid());
            setenv("NOTIFY_SOCKET", notify_path, 1);
            setenv("WATCHDOG_USEC", "400000", 1);
            setenv("WATCHDOG_PID", self, 1);
        }
        int devnull = open("/dev/null", O_RDWR);
        int log = open(log_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO), dup2(devnull, STDOUT_FILENO);
        if (log >= 0)
            dup2(log, STDERR_FILENO);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    d->pid = pid;
    memset(W.ranks, 0, sizeof W.ranks);
    for (double t0 = now_s(); now_s() - t0 < 60; sleep_ms(20)) {
        for (int r = 0; r < np; r++)
            if (!W.ranks[r])
                W.ranks[r] = rank_pid(pid, r);
        FILE *f = fopen(port_file, "r");
        if (f) {
            int ok = fscanf(f, "%d", &d->port) == 1;
            fclose(f);
            if (ok && d->port > 0)
                return true;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            d->pid = 0;
            return false;
        }
    }
    return false;
}

static bool world_start_with(int np, int workers)
{
    return world_start_on(np, workers, NULL, NULL);
}

static bool world_start(int np)
{
    return world_start_with(np, 1);
}

/* Every process of the world goes, whatever state it is in. */
static void world_kill(void)
{
    for (int r = 0; r < MAX_RANKS; r++)
        if (W.ranks[r] > 0)
            kill(W.ranks[r], SIGKILL);
    daemon_kill(&W.d);
    memset(W.ranks, 0, sizeof W.ranks);
}

static void setup(void)
{
    need_mpi();
    gpus_flag = "none";
    memset(&W, 0, sizeof W);
    notify_path[0] = '\0';
    snprintf(W.d.dir, sizeof W.d.dir, "/tmp/traind-mpi-XXXXXX");
    cr_assert_not_null(mkdtemp(W.d.dir));
    cr_assert(gen_dctaxi(&W.d, "rep", 700, 3));
}

/*
 * SIGUSR1 to mpirun, which passes it on to every rank (SIGTERM would be followed by SIGKILL a
 * second later): mpirun's exit status, or -1 if it did not exit within timeout_s.
 */
static int world_stop(double timeout_s)
{
    kill(W.d.pid, SIGUSR1);
    for (double t0 = now_s(); now_s() - t0 < timeout_s; sleep_ms(10)) {
        int st;
        if (waitpid(W.d.pid, &st, WNOHANG) == W.d.pid) {
            W.d.pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
    }
    return -1;
}

/* A world still up stops cleanly: mpirun exits 0 only if every rank did (leaks and sanitizer
 * reports in any rank fail the test). */
static void teardown(void)
{
    if (W.d.pid > 0) {
        int status = world_stop(30);
        if (status != 0)
            daemon_print_log(&W.d);
        cr_expect_eq(status, 0, "mpirun exited with status %d on SIGUSR1", status);
    }
    world_kill();
    daemon_cleanup(&W.d);
}

TestSuite(mpi, .init = setup, .fini = teardown, .timeout = 240);

/* The end of a test whose world is up: it must stop with status 0 (Criterion does not count
 * what the teardown expects). */
static void world_end_clean(void)
{
    int status = world_stop(30);
    if (status != 0)
        daemon_print_log(&W.d);
    cr_expect_eq(status, 0, "mpirun exited with status %d on SIGUSR1", status);
}

/* The seed baseline, or an MLP with Adam, as n replicas on device; 97-row batches split unevenly over 3. */
static const char *spec_on(bool mlp, int n, int iterations, const char *device, const char *more)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"data\":{\"train\":\"%s/rep/part*.csv\"},\"model\":%s,\"loss\":\"mse\",\"optimizer\":%s,"
             "\"clip_grad_norm\":0.5,\"batch_size\":97,\"iterations\":%d,\"dtype\":\"float64\",\"seed\":0,"
             "\"replicas\":%d,\"device\":\"%s\"%s}",
             W.d.dir, mlp ? "{\"type\":\"mlp\",\"hidden\":[16,8]}" : "{\"type\":\"linear\"}",
             mlp ? "{\"type\":\"adam\",\"lr\":0.01}" : "{\"type\":\"sgd\",\"lr\":0.03}", iterations, n, device,
             more);
    return buf;
}

static const char *spec_of(bool mlp, int n, int iterations, const char *more)
{
    return spec_on(mlp, n, iterations, "cpu", more);
}

static void losses_of(const char *spec, double *loss, int n)
{
    char id[64];
    submit_job(&W.d, spec, id, sizeof id);
    json_t *j = wait_job_done(&W.d, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
    job_losses(&W.d, id, loss, (size_t)n);
}

static void expect_close(const double *got, const double *want, int n, double tol, const char *what)
{
    for (int i = 0; i < n; i++)
        cr_expect(fabs(got[i] - want[i]) <= tol * fabs(want[i]),
                  "%s: iteration %d: loss %.17g, one replica's %.17g", what, i, got[i], want[i]);
}

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
    json_t *j = wait_job_done(&W.d, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
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
            losses_of(spec_of(mlp, 1, ITERATIONS, ""), one, ITERATIONS);
            losses_of(spec_of(mlp, np, ITERATIONS, ""), many, ITERATIONS);
        } else {
            losses_and_evals_of(with_test(spec_of(mlp, 1, ITERATIONS, ",\"eval_every\":5")), one, eval_one,
                                ITERATIONS);
            losses_and_evals_of(with_test(spec_of(mlp, np, ITERATIONS, ",\"eval_every\":5")), many, eval_many,
                                ITERATIONS);
        }
        snprintf(what, sizeof what, "%s as %d replicas on %d ranks", mlp ? "MLP+Adam" : "linear", np, np);
        expect_close(many, one, ITERATIONS, mlp ? 1e-8 : 1e-9, what);
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
    losses_of(spec_of(false, 1, ITERATIONS, ""), one, ITERATIONS);
    for (int n = 3; n <= 4; n++) {
        char what[64];
        losses_of(spec_of(false, n, ITERATIONS, ""), many, ITERATIONS);
        snprintf(what, sizeof what, "linear as %d replicas on 2 ranks", n);
        expect_close(many, one, ITERATIONS, 1e-9, what);
    }
    world_end_clean();
}

/* The MLP's gradient (289 float64s) in buckets of 0.001 MiB: 131 elements, so 3 buckets. */
#define BUCKETS ",\"replica_bucket_mb\":0.001"

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
    losses_of(spec_of(true, 1, ITERATIONS, ""), one, ITERATIONS);
    losses_of(spec_of(true, 4, ITERATIONS, ",\"replica_bucket_mb\":0"), whole, ITERATIONS);
    losses_of(spec_of(true, 4, ITERATIONS, BUCKETS), bucketed, ITERATIONS);
    for (int i = 0; i < ITERATIONS; i++)
        cr_expect(memcmp(&bucketed[i], &whole[i], sizeof whole[i]) == 0,
                  "iteration %d: loss %.17g in buckets, %.17g whole", i, bucketed[i], whole[i]);
    expect_close(bucketed, one, ITERATIONS, 1e-8, "MLP+Adam as 4 replicas on 2 ranks, in buckets");
    char id[64];
    submit_job(&W.d, spec_of(true, 4, 10000000, BUCKETS), id, sizeof id);
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
    submit_job(&W.d, spec_of(true, 2, 10000000, BUCKETS ",\"checkpoint_every\":100"), id, sizeof id);
    expect_buckets_shown(id, 2, 3);
    cr_assert_gt(W.ranks[1], 0, "rank 1's process was not found");
    kill(W.ranks[1], SIGSTOP);
    wait_job_state(&W.d, id, "queued", 60);
    kill(W.ranks[1], SIGCONT);
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
    losses_of(spec_of(false, 2, LONG_ITERATIONS, ""), straight, LONG_ITERATIONS);
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
    submit_job(&W.d, spec_of(false, 2, LONG_ITERATIONS, ",\"checkpoint_every\":100"), id, sizeof id);
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
    for (double t0 = now_s(); !gone(first[0]) && now_s() - t0 < 30;)
        sleep_ms(20);
    cr_assert(gone(first[0]), "rank 0 (pid %d) outlived the world", (int)first[0]);

    cr_assert(world_start(2), "the world did not start again (see %s/traind.log)", W.d.dir);
    json_t *j = wait_job_done(&W.d, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
    cr_expect(daemon_log_contains(&W.d, "goes on from iteration"), "the job did not resume from a checkpoint");
    expect_losses_of_an_uninterrupted_run(id);
    world_end_clean();
}

/* While a job trains across ranks, GET /jobs/{id}/replicas shows the follower's replica's figures. */
Test(mpi, replicas_on_a_follower_report_their_figures)
{
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    char id[64], path[128];
    submit_job(&W.d, spec_of(false, 2, 10000000, ""), id, sizeof id);
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
    submit_job(&W.d, spec_of(false, 2, 10000000, ""), id, sizeof id);
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
    submit_job(&W.d, spec_of(false, 1, ITERATIONS, ""), id, sizeof id);
    json_decref(wait_job_done(&W.d, id, 120));
    job_losses(&W.d, id, first, ITERATIONS);
    snprintf(from, sizeof from, ",\"init\":{\"from\":\"%s\"}", id);
    losses_of(spec_of(false, 1, ITERATIONS, from), one, ITERATIONS);
    losses_of(spec_of(false, 2, ITERATIONS, from), many, ITERATIONS);
    cr_expect(one[0] < first[0], "init.from did not start where the first job ended");
    expect_close(many, one, ITERATIONS, 1e-9, "linear from another job's parameters, on 2 ranks");
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
    submit_job(&W.d, spec_of(false, 2, ITERATIONS, ""), id, sizeof id);
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
    submit_job(&W.d, spec_of(false, 2, LONG_ITERATIONS, ",\"checkpoint_every\":100"), id, sizeof id);
    wait_job_iterations(&W.d, id, 300);
    cr_assert_gt(W.ranks[1], 0, "rank 1's process was not found");
    kill(W.ranks[1], SIGSTOP);
    wait_job_state(&W.d, id, "queued", 60);
    kill(W.ranks[1], SIGCONT);
    json_t *j = wait_job_done(&W.d, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
    expect_losses_of_an_uninterrupted_run(id);
    world_end_clean();
}

/* Under systemd (systemd/traind-mpi.service) mpirun is the main process: rank 0, its child,
 * says READY=1 once it listens and feeds the watchdog meant for mpirun. */
Test(mpi, rank_0_notifies_systemd_for_mpirun)
{
    snprintf(notify_path, sizeof notify_path, "%s/notify", W.d.dir);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    cr_assert_lt(strlen(notify_path), sizeof sa.sun_path);
    memcpy(sa.sun_path, notify_path, strlen(notify_path) + 1);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0, "bind %s: %m", notify_path);
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
    setup();
    gpus_flag = "all";
}

TestSuite(mpi_gpu, .init = setup_gpu, .fini = teardown, .timeout = 240);

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
    submit_job(&W.d, spec_on(false, n, 10000000, "auto", ""), id, sizeof id);
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
        losses_of(spec_on(mlp, 1, ITERATIONS, "cuda:0", ""), one, ITERATIONS);
        for (int n = gpus + 1; n <= 2 * gpus; n += gpus - 1) {
            char id[64];
            submit_job(&W.d, spec_on(mlp, n, ITERATIONS, "auto", ""), id, sizeof id);
            json_t *j = wait_job_done(&W.d, id, 120);
            cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                             json_string_value(json_object_get(json_object_get(j, "error"), "message")));
            json_decref(j);
            job_losses(&W.d, id, many, ITERATIONS);
            snprintf(what, sizeof what, "%s as %d GPU replicas on 2 ranks", mlp ? "MLP+Adam" : "linear", n);
            expect_close(many, one, ITERATIONS, mlp ? 1e-8 : 1e-9, what);
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
    losses_of(spec_on(true, 1, ITERATIONS, "cuda:0", ""), one, ITERATIONS);
    losses_of(spec_on(true, 2 * gpus, ITERATIONS, "auto", ",\"replica_bucket_mb\":0"), whole, ITERATIONS);
    losses_of(spec_on(true, 2 * gpus, ITERATIONS, "auto", BUCKETS), bucketed, ITERATIONS);
    for (int i = 0; i < ITERATIONS; i++)
        cr_expect(memcmp(&whole[i], &bucketed[i], sizeof whole[i]) == 0,
                  "iteration %d: loss %.17g in buckets, %.17g whole", i, bucketed[i], whole[i]);
    expect_close(bucketed, one, ITERATIONS, 1e-8, "MLP+Adam as GPU replicas on 2 ranks, in buckets");
    world_end_clean();
}

Test(mpi_gpu, more_gpu_replicas_than_the_world_has_are_refused)
{
    int gpus = emu_gpus();
    cr_assert(world_start(2), "the world did not start (see %s/traind.log)", W.d.dir);
    struct http_reply r;
    cr_assert(http(&W.d, "POST", "/jobs", "application/json", spec_on(false, 2 * gpus + 1, ITERATIONS, "auto", ""), &r));
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
    static const char *const hb[] = {"--allreduce-timeout", "2", NULL};
    cr_assert(world_start_on(2, 1, hb, NULL), "the world did not start (see %s/traind.log)", W.d.dir);
    char id[64];
    submit_job(&W.d, spec_on(false, 2 * gpus, GPU_LONG_ITERATIONS, "auto", ",\"checkpoint_every\":5"), id, sizeof id);
    wait_job_iterations(&W.d, id, 10);
    cr_assert_gt(W.ranks[1], 0, "rank 1's process was not found");
    kill(W.ranks[1], SIGSTOP);
    wait_job_state(&W.d, id, "queued", 60);
    kill(W.ranks[1], SIGCONT);
    json_t *j = wait_job_done(&W.d, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
    double resumed[GPU_LONG_ITERATIONS], one[GPU_LONG_ITERATIONS];
    job_losses(&W.d, id, resumed, GPU_LONG_ITERATIONS);
    losses_of(spec_on(false, 1, GPU_LONG_ITERATIONS, "cuda:0", ""), one, GPU_LONG_ITERATIONS);
    expect_close(resumed, one, GPU_LONG_ITERATIONS, 1e-9, "linear, GPU replicas resumed after a hung follower");
    world_end_clean();
}
