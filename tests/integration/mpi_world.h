/*
 * mpi_world.h — a world of traind processes under mpirun (Open MPI) on loopback, for the mpi and
 * mpi_gpu tests: start and stop it, find its ranks' processes, hang a follower, hold a job
 * paused, and the job specs and loss checks those tests share. One world at a time, in W;
 * world_setup and world_teardown are a Criterion suite's .init and .fini.
 */
#ifndef TRAIND_TESTS_MPI_WORLD_H
#define TRAIND_TESTS_MPI_WORLD_H

#include <stdbool.h>
#include <sys/types.h>

#include "client.h"

#define ITERATIONS 24   /* a short job's iterations */
/* The MLP's gradient (289 float64s) in buckets of 0.001 MiB: 131 elements, so 3 buckets. */
#define BUCKETS ",\"replica_bucket_mb\":0.001"
#define MAX_RANKS 4

struct world_proc {
    struct daemon_proc d;   /* d.pid: mpirun's */
    pid_t ranks[MAX_RANKS]; /* by rank, once seen */
    char notify_path[300];  /* set: mpirun runs as systemd would run it, with a watchdog */
    const char *gpus;       /* --gpus of every rank: "none" unless a test says otherwise */
};

/* The world of the running test. */
extern struct world_proc W;

/* Skips the test without mpirun or a traind built with MPI (under CI=true fails instead), then
 * makes a scratch dir with the "rep" data set. */
void world_setup(void);
/* A world still up stops cleanly: mpirun exits 0 only if every rank did (leaks and sanitizer
 * reports in any rank fail the test); then every process goes and the scratch dir with them. */
void world_teardown(void);

/*
 * mpirun traind ... on loopback, np ranks of workers CPU workers, with extra flags (NULL-ended,
 * may be NULL); follower_root: the followers' --data-root, when not rank 0's. True once rank 0 listens.
 */
bool world_start_on(int np, int workers, const char *const *extra, const char *follower_root);
/* The same with no extra flags, every rank on the same data root. */
bool world_start_with(int np, int workers);
/* The same with one CPU worker a rank. */
bool world_start(int np);
/*
 * SIGUSR1 to mpirun, which passes it on to every rank (SIGTERM would be followed by SIGKILL a
 * second later): mpirun's exit status, or -1 if it did not exit within timeout_s.
 */
int world_stop(double timeout_s);
/* The end of a test whose world is up: it must stop with status 0 (Criterion does not count
 * what the teardown expects). */
void world_end_clean(void);
/* Whether pid is gone (or a zombie nobody has reaped yet). */
bool world_gone(pid_t pid);
/* Rank 1 stops answering (SIGSTOP) until job id goes back to the queue, then answers again (SIGCONT). */
void world_hang_follower(const char *id);

/* The seed baseline, or an MLP with Adam, as n replicas on device; 97-row batches split unevenly
 * over 3 (a static buffer). */
const char *world_spec_on(bool mlp, int n, int iterations, const char *device, const char *more);
/* The same on the CPU. */
const char *world_spec_of(bool mlp, int n, int iterations, const char *more);
/* Job id ends within timeout_s, and succeeded (else the test fails with its error). */
void world_expect_succeeded(const char *id, double timeout_s);
/* The n losses of spec's job, which must succeed. */
void world_losses_of(const char *spec, double *loss, int n);
/* Each of got is want's to tol (relative); what names the run in a failure. */
void world_expect_close(const double *got, const double *want, int n, double tol, const char *what);
/*
 * Runs spec (of planned iterations) paused once it has done `at`: it becomes "paused" with a
 * checkpoint where it stopped, short of planned, every worker of every rank lets go of it
 * (GET /devices), and for a second after its iteration stays put and no worker takes it again;
 * then resumed, it must succeed. Its losses into loss.
 */
void world_paused_run(const char *spec, long long at, int planned, double *loss);

#endif
