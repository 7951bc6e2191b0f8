/* scheduler.h — the scheduler (sched_*): hands queued jobs to idle workers and applies their events, on the loop thread. */
#ifndef TRAIND_DAEMON_SCHEDULER_H
#define TRAIND_DAEMON_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "devices.h"
#include "err.h"
#include "job.h"
#include "replica.h"
#include "store.h"

struct backend_factory;
struct world;

struct sched_config {
    int cpu_workers;                  /* at least 1 */
    const char *const *data_roots;    /* must outlive the scheduler */
    size_t n_data_roots;
    int64_t heartbeat_timeout_ms;     /* a worker silent this long is stuck; 0: the default */
    const char *state_dir;            /* checkpoints go to state_dir/checkpoints/<job id>/; NULL: none */
    const char *cache_dir;            /* downloaded partitions; NULL or "": none (must outlive s) */
    uint64_t cache_limit;             /* bytes; 0: no limit */
    struct store_list_limits list_limits; /* what one listing of a job's data may bring; 0: defaults */
    const struct devices_info *devices; /* one worker "cuda:N" per GPU in it; NULL: CPU workers only */
    const struct backend_factory *gpu_backends; /* makes those workers' backends (the composition
                                                   root hands in gpu/'s); NULL: none can be made */
    struct world *world;              /* under mpirun, rank 0's view of the others (world.h): their CPU
                                         workers join this scheduler's as "rankR/cpu:I"; NULL: alone */
    double allreduce_timeout_s;       /* a replica waiting this long for a peer ends the run; 0: the default */
};

/* A training step may legitimately take this long (a big batch, a slow first download). */
#define SCHED_HEARTBEAT_TIMEOUT_MS (600 * 1000)
/*
 * Replicas wait in an all-reduce for the slowest, and for rank 0's evaluations and checkpoint
 * writes between steps: a peer absent this long is taken for lost.
 */
#define SCHED_ALLREDUCE_TIMEOUT_S 300.0

struct sched;

int sched_start(uv_loop_t *loop, struct job_registry *reg, const struct sched_config *cfg,
                struct sched **out, struct err *e);

/*
 * Called on the loop thread whenever a job gets a metrics row or changes state
 * (the API wakes long-polling requests with it). One listener; NULL removes it.
 */
typedef void (*sched_listener_fn)(void *ctx, struct job *j);
void sched_set_listener(struct sched *s, sched_listener_fn fn, void *ctx);

/*
 * Jobs found `running` at start were interrupted by a crash or SIGKILL: they go back
 * to the queue, to go on from their latest checkpoint (or iteration 0), with the
 * metrics past that point dropped. Every job's checkpoint folder is cleared of files its
 * record does not name. Returns how many jobs were requeued. Call before the first kick.
 */
int sched_recover(struct sched *s);

/*
 * Starts queued jobs on idle workers, highest priority first, each on a worker its device
 * allows (placement.h); a job asking for a GPU this machine lacks fails at once (ERR_DEVICE).
 * Call after adding a job to the registry.
 */
void sched_kick(struct sched *s);

/*
 * Cancels a job: a queued or paused one at once, a running one at its next step
 * boundary. Returns 0, or -1 when the job is already in a terminal state.
 */
int sched_cancel(struct sched *s, struct job *j);

/*
 * Pauses a job: a queued one at once, a running one at its next step boundary (after a
 * checkpoint, so resuming loses nothing), which frees its worker. -1 unless queued or running.
 */
int sched_pause(struct sched *s, struct job *j);
/* A paused job goes back to the queue; -1 unless paused. */
int sched_resume(struct sched *s, struct job *j);

/*
 * Worker k of sched_worker_count: its name, its rank (0: this process) and the job it trains
 * (NULL: idle). For GET /devices under mpirun.
 */
int sched_worker_count(const struct sched *s);
const char *sched_worker_at(const struct sched *s, int k, int *rank, const struct job **job);

/* What the worker of a GPU ("cuda:N") knows of it; false when no worker trains on it. */
struct sched_gpu_state {
    const struct err *error;          /* its backend failed or its CUDA context was lost; NULL when well */
    bool has_memory;                  /* the backend exists: the two counters below are its allocator's */
    uint64_t allocated, reserved;     /* bytes handed out, bytes held from CUDA (PyTorch's memory_allocated,
                                         memory_reserved) */
};
bool sched_gpu_state(const struct sched *s, const char *device, struct sched_gpu_state *out);

/* Jobs waiting for a worker (state queued). */
size_t sched_queue_depth(const struct sched *s);

/* One replica of a running job: its rank, its worker's device and its figures so far. */
struct sched_replica {
    int rank;
    const char *device;               /* the worker's name; lives as long as the scheduler */
    const char *host;                 /* under mpirun, its rank's host; NULL: this one */
    struct replica_stats st;          /* a replica on another rank: what its rank last reported */
    bool straggler;                   /* train_world_straggler names it now */
};

/*
 * The replicas of j while it runs as several (out[0 .. return value), by rank, at most cap);
 * 0 when it runs as one or not at all. A job may run as fewer replicas than its spec asks
 * (the workers it may use that answer, when fewer: docs/internals.md, "Replicas").
 */
int sched_replicas(const struct sched *s, const struct job *j, struct sched_replica *out, int cap);

/* Whether spec asks for more replicas than there are workers it may use: why says so. */
bool sched_replicas_refused(const struct sched *s, const struct job_spec *spec, char *why, size_t cap);

/*
 * Checks every worker's heartbeat: a job whose worker has been silent longer than
 * the timeout is failed (internal, "worker stopped responding"), or for a job running as
 * replicas requeued to go on from its latest checkpoint on the workers that answer, and
 * that worker gets no more jobs until it shows life. A replica waiting in an all-reduce
 * for its peers is not silent. Running replicas' stragglers are noted in their jobs'
 * warnings (job_warn_straggler). Returns true when every worker is healthy.
 */
bool sched_check_heartbeats(struct sched *s);

/*
 * Begins a graceful stop: nothing new is dispatched, running jobs stop at their next
 * step boundary and go back to `queued` (resumable), then done(ctx) is called on the
 * loop thread (at once when nothing runs).
 */
void sched_drain(struct sched *s, void (*done)(void *ctx), void *ctx);
bool sched_draining(const struct sched *s);

/*
 * Stops for good: no more dispatching, running jobs stopped at their next step and
 * requeued, worker threads joined, pending events applied, the doorbell handle closed.
 * Free with sched_free once the loop has run the close callbacks.
 */
void sched_shutdown(struct sched *s);
void sched_free(struct sched *s);

#endif
