/*
 * train.h — the training engine's entry point (train_*): one job's plan trained to the end on
 * the calling thread, on the CPU or a GPU worker's device, its metrics, checkpoints and end
 * reported through hooks. No HTTP, no database, no threads of the caller's: a daemon's worker
 * and a test call it alike.
 */
#ifndef TRAIND_TRAIN_TRAIN_H
#define TRAIND_TRAIN_TRAIN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "metrics.h"
#include "spec.h"
#include "store.h"

struct wdev;
struct train_world;

/* What one run trains, and where; every pointer is borrowed for the length of train_run. */
struct train_plan {
    const struct job_spec *spec;      /* a parsed spec (spec_parse), immutable while it runs */
    const char *job_id;               /* written into checkpoints' metadata; NULL: "" */
    const char *const *data_roots;    /* file reads are confined below these */
    size_t n_data_roots;
    const char *cache_dir;            /* downloads of s3:// and http(s):// partitions; NULL: none */
    uint64_t cache_limit;             /* bytes; 0: no limit */
    struct store_list_limits list_limits; /* what one listing of the data may bring; 0: defaults */
    const char *ckpt_dir;             /* where checkpoints go; NULL: none are written */
    const char *resume_from;          /* a checkpoint of this job to go on from; NULL: the start */
    int init_fd;                      /* init.from's job checkpoint, open (train_run reads it, the
                                         caller closes it); -1: none, a URL is fetched instead */
    struct wdev *dev;                 /* a GPU worker's device (wdev.h); NULL: the CPU */
    const struct err *dev_error;      /* a GPU worker without a device: why (the run fails, ERR_DEVICE) */
    /* One of the job's replicas (replica.h): this run is rank of world, on its own thread and
     * device; every rank has the same plan otherwise. NULL: the job's only run. */
    struct train_world *world;
    int rank;
};

/* Why a run is asked to stop at its next step boundary (train_hooks.stop). */
enum train_stop { TRAIN_RUN, TRAIN_STOP_CANCEL, TRAIN_STOP_PREEMPT, TRAIN_STOP_PAUSE };

/* Where training stands after a metrics row. */
struct train_progress {
    uint64_t epoch;                   /* the data cursor's epoch after the row */
    int64_t planned;                  /* the iterations the job does in all (0: not known yet) */
    uint64_t bytes_fetched;           /* this run's training data read from its store so far, and the */
    uint64_t bytes_total;             /* listed size of it (dataset_stats: for Parquet, only the footers
                                         and the chosen columns' chunks are read) */
};

/*
 * How a run talks to its caller. Every hook is called on train_run's thread, and any may be
 * NULL. ctx is passed to each.
 */
struct train_hooks {
    void *ctx;
    /* After every iteration, in order from the first iteration this run does. */
    void (*metrics)(void *ctx, const struct metrics_row *row, const struct train_progress *p);
    /*
     * A checkpoint written to path after iterations iterations (the data cursor in epoch);
     * path is borrowed for the call. The caller removes older files once it has recorded it.
     */
    void (*checkpoint)(void *ctx, const char *path, int64_t iterations, uint64_t epoch);
    /*
     * Last, exactly once: e->code ERR_OK (succeeded; params are the final parameters and
     * ownership passes, job_params_free), ERR_CANCELLED (a stop), or why it failed (params
     * NULL). After it returns the run touches nothing of the caller's.
     */
    void (*done)(void *ctx, const struct err *e, struct job_params *params);
    /* A stop request (enum train_stop), set by any thread and read between steps; NULL: none. */
    const atomic_int *stop;
    /* Set with stop: downloads in progress give up at once. NULL: never. */
    const atomic_bool *abort_io;
    /* Set to train_now_ms() at every step and while waiting for data; NULL: no heartbeat. */
    atomic_llong *heartbeat;
};

/*
 * Trains plan->spec to the end: one metrics call per iteration, a checkpoint every
 * spec->checkpoint_every iterations and at the end, then done. A stop request ends it with
 * ERR_CANCELLED at the next step boundary, whatever the reason, after a checkpoint.
 */
void train_run(const struct train_plan *plan, const struct train_hooks *hooks);

/* Monotonic milliseconds, the clock of heartbeats. */
int64_t train_now_ms(void);

#endif
