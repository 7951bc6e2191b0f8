/* runner.h — the training loop of one job, run on a worker thread; talks back only through events. */
#ifndef TRAIND_DAEMON_RUNNER_H
#define TRAIND_DAEMON_RUNNER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "err.h"
#include "job.h"
#include "mpsc.h"
#include "spec.h"
#include "nn.h"

struct wdev;

enum runner_event_kind { RUNNER_EV_METRICS, RUNNER_EV_CHECKPOINT, RUNNER_EV_DONE };

/* What a runner tells the loop thread; whoever receives one frees it with runner_event_free. */
struct runner_event {
    struct mpsc_node node;            /* first: events travel through an mpsc queue */
    enum runner_event_kind kind;
    struct runner_task *task;
    struct metrics_row row;           /* METRICS */
    int64_t iterations;               /* CHECKPOINT: iterations done when it was taken; METRICS: the
                                         iterations the job does in all (0: not known yet) */
    uint64_t epoch;                   /* CHECKPOINT, METRICS: the data cursor's epoch (after the row) */
    char *path;                       /* CHECKPOINT: the file (owned) */
    struct err err;                   /* DONE: ERR_OK, ERR_CANCELLED, or why it failed */
    struct job_params *params;        /* DONE and succeeded: the final parameters */
};

/* Why a running task is asked to stop at its next step boundary. */
enum runner_stop { RUNNER_RUN, RUNNER_STOP_CANCEL, RUNNER_STOP_PREEMPT, RUNNER_STOP_PAUSE };

struct runner_task {
    const struct job_spec *spec;      /* borrowed; immutable while the job runs */
    const char *const *data_roots;    /* file reads are confined below these */
    size_t n_data_roots;
    atomic_int stop;                  /* enum runner_stop; set by any thread, checked between steps */
    atomic_bool abort_io;             /* set with stop: downloads in progress give up at once */
    atomic_llong *heartbeat;          /* monotonic ms, bumped every step (the worker's; may be NULL) */
    atomic_int in_flight;             /* METRICS events emitted, not yet applied by the loop thread */
    char job_id[17];                  /* for checkpoints' metadata */
    char *ckpt_dir;                   /* where checkpoints go (owned); NULL: none are written */
    char *resume_from;                /* checkpoint to go on from (owned), or NULL: from the start */
    const char *cache_dir;            /* downloads of s3:// and http(s):// partitions; NULL: none */
    uint64_t cache_limit;             /* bytes; 0: no limit */
    /* Hands an event over (takes ownership). Called from the worker thread. */
    void (*emit)(void *ctx, struct runner_event *ev);
    void *emit_ctx;
    void *owner;                      /* the job, opaque to the runner */
    struct wdev *dev;                 /* the GPU worker's device (set by the worker); NULL: the CPU */
    const struct err *dev_error;      /* a GPU worker without a device: why (the job fails, ERR_DEVICE) */
    struct runner_event *done;        /* allocated up front so the last word is never lost */
    int init_fd;                      /* init.from's job checkpoint, opened at start (owned); -1: none */
    /* The worker's own: what its METRICS events say besides the row (see runner_event). */
    uint64_t progress_epoch;
    int64_t progress_planned;
};

/*
 * A runner waits before emitting more rows than this ahead of the loop thread, so a job
 * of tiny batches cannot outrun the database and grow the queue without bound.
 */
#define RUNNER_MAX_IN_FLIGHT 4096

/* A task ready to run (done allocated). NULL on out of memory. */
struct runner_task *runner_task_new(const struct job_spec *spec, const char *const *data_roots,
                                    size_t n_data_roots, void *owner);
void runner_task_free(struct runner_task *t);
void runner_event_free(struct runner_event *ev);

/*
 * Trains t->spec to the end, emitting one METRICS event per iteration and exactly
 * one DONE event (t->done) last; after emitting DONE it touches t no more. A stop
 * request ends it with ERR_CANCELLED at the next step boundary, whatever the reason,
 * after a checkpoint. Checkpoints (CHECKPOINT events) are also written every
 * spec->checkpoint_every iterations and at the end.
 */
void runner_run(struct runner_task *t);

/* Monotonic milliseconds, the clock of heartbeats. */
int64_t runner_now_ms(void);

#endif
