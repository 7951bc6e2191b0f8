/*
 * task.h — a job handed to a worker (task_*): the training engine's plan and stop flags, and
 * the hooks that turn what train_run reports into events for the loop thread's queue.
 */
#ifndef TRAIND_DAEMON_TASK_H
#define TRAIND_DAEMON_TASK_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

#include "err.h"
#include "job.h"
#include "mpsc.h"
#include "train.h"

struct wdev;

enum task_event_kind { TASK_EV_METRICS, TASK_EV_CHECKPOINT, TASK_EV_DONE };

/* What a task tells the loop thread; whoever receives one frees it with task_event_free. */
struct task_event {
    struct mpsc_node node;            /* first: events travel through an mpsc queue */
    enum task_event_kind kind;
    struct task *task;
    struct metrics_row row;           /* METRICS */
    int64_t iterations;               /* CHECKPOINT: iterations done when it was taken; METRICS: the
                                         iterations the job does in all (0: not known yet) */
    uint64_t epoch;                   /* CHECKPOINT, METRICS: the data cursor's epoch (after the row) */
    uint64_t bytes_fetched, bytes_total; /* METRICS: the run's data read so far and its size (train_progress) */
    char *path;                       /* CHECKPOINT: the file (owned) */
    struct err err;                   /* DONE: ERR_OK, ERR_CANCELLED, or why it failed */
    struct job_params *params;        /* DONE and succeeded: the final parameters */
};

struct task {
    const struct job_spec *spec;      /* borrowed; immutable while the job runs */
    const char *const *data_roots;    /* file reads are confined below these */
    size_t n_data_roots;
    atomic_int stop;                  /* enum train_stop; set by any thread, checked between steps */
    atomic_bool abort_io;             /* set with stop: downloads in progress give up at once */
    atomic_int in_flight;             /* METRICS events emitted, not yet applied by the loop thread */
    char job_id[17];                  /* for checkpoints' metadata */
    char *ckpt_dir;                   /* where checkpoints go (owned); NULL: none are written */
    char *resume_from;                /* checkpoint to go on from (owned), or NULL: from the start */
    const char *cache_dir;            /* downloads of s3:// and http(s):// partitions; NULL: none */
    uint64_t cache_limit;             /* bytes; 0: no limit */
    struct store_list_limits list_limits;
    /* Hands an event over (takes ownership). Called from the worker thread. */
    void (*emit)(void *ctx, struct task_event *ev);
    void *emit_ctx;
    void *owner;                      /* the job, opaque to the task */
    struct task_event *done;          /* allocated up front so the last word is never lost */
    int init_fd;                      /* init.from's job checkpoint, opened at start (owned); -1: none */
    struct train_world *world;        /* the job's replicas (borrowed), this task rank of them; NULL: alone */
    int rank;
};

/*
 * A task waits before emitting more rows than this ahead of the loop thread, so a job
 * of tiny batches cannot outrun the database and grow the queue without bound.
 */
#define TASK_MAX_IN_FLIGHT 4096

/* A task ready to run (done allocated). NULL on out of memory. */
struct task *task_new(const struct job_spec *spec, const char *const *data_roots, size_t n_data_roots,
                      void *owner);
void task_free(struct task *t);
void task_event_free(struct task_event *ev);

/*
 * On the worker's thread: trains t (train_run) on dev (NULL: the CPU; dev_error: why a GPU
 * worker has no device, and the job fails), bumping heartbeat. Emits one METRICS event per
 * iteration, a CHECKPOINT event per checkpoint written, and exactly one DONE event (t->done)
 * last; after emitting DONE it touches t no more.
 */
void task_run(struct task *t, struct wdev *dev, const struct err *dev_error, atomic_llong *heartbeat);

#endif
