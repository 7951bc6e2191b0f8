/* runner_impl.h — what runner.c and runner_feed.c share: one training run's state and the batch feed. */
#ifndef TRAIND_TRAIN_RUNNER_IMPL_H
#define TRAIND_TRAIN_RUNNER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autograd.h"
#include "backend.h"
#include "dataset.h"
#include "evaluate.h"
#include "nn.h"
#include "optim.h"
#include "prefetch.h"
#include "spec_compile.h"
#include "train.h"
#include "wdev.h"

/* Batches in flight: one being trained on, the rest filled ahead by the prefetch thread. */
#define RUNNER_RING_SLOTS 3

/* One call of train_run: what it trains and whom it tells. */
struct train_task {
    const struct job_spec *spec;      /* plan->spec */
    const struct train_plan *plan;
    const struct train_hooks *hooks;
    const char *job_id;               /* plan->job_id, or "" */
    struct job_params *params;        /* the final parameters, for the done hook */
};

/* The stop request now (TRAIN_RUN when none). */
enum train_stop runner_stop_asked(const struct train_task *t);

/* Everything one training run holds, so one function can free it on every path. */
struct run {
    const struct backend *be;   /* where the model, optimizer and steps live */
    struct wdev *dev;           /* be's worker device: the GPU worker's, or own_dev */
    struct wdev *own_dev;       /* a CPU run's device, opened and closed by the run */
    struct wdev_upload *upload; /* the two device buffers batches are copied into (none on the CPU) */
    struct train_world *world;  /* plan->world: this run is one of the job's replicas; NULL: alone */
    int rank;                   /* plan->rank */
    size_t bucket_bytes;        /* the spec's replica_bucket_mb: the gradient's all-reduce buckets */
    struct dataset *ds;
    bool share_only;            /* ds writes this replica's share of each batch only, from the slot's start */
    struct prefetch *pf;        /* owns ds's reading once started */
    struct nn_model *model;
    struct optim *opt;
    struct ag_tape *tape;
    size_t features;
    struct spec_compiled cs;    /* the job's spec as core's and storage's settings */
    enum tensor_dtype dt;
    enum nn_loss_kind loss;
    int64_t it0;                /* iterations done before this run (resumed from a checkpoint) */
    int64_t outputs;            /* the model's output width */
    struct dataset_cursor cursor; /* of the next batch: what a checkpoint taken now stores */
    int64_t per_epoch;          /* batches of an epoch; 0 until the row counts or an epoch's end tell */
    struct prefetch_slot first; /* taken early to size the model from the data; data NULL otherwise */
    struct evaluate *eval;      /* data.test, or NULL */
    /*
     * The batch after the one being stepped, fetched and its copy started before the
     * step so the copy runs under it. ahead.data is its ring slot until the
     * copy finished (then NULL, and ahead_dev is where it went; on the CPU nothing is copied
     * and ahead_dev is the slot's data, held until its step is done); a batch past the last epoch
     * or empty stays on the host for train()'s checks; a data error waits in ahead_err for
     * the iteration that would have used the batch.
     */
    enum { AHEAD_NONE, AHEAD_COPYING, AHEAD_ON_DEVICE, AHEAD_ON_HOST, AHEAD_FAILED } ahead_state;
    struct prefetch_slot ahead;
    void *ahead_dev;
    bool ahead_cached;          /* ahead_dev is in cache, not a batch buffer */
    struct err ahead_err;
    /*
     * GPU, unshuffled data: the batches of epoch cache_epoch (the first whose batch 0 this run
     * copied) stay on the device, and later epochs train on them with no copy. NULL otherwise.
     */
    struct wdev_cache *cache;
    uint64_t cache_epoch;       /* UINT64_MAX until that batch 0 */
    bool cache_told;            /* the log said the data is resident */
};

/* The batch of one iteration: its ring slot (data NULL once given back) and what the step reads. */
struct batch {
    struct prefetch_slot slot;
    void *data;                 /* what the step reads: the slot's memory on the CPU, a device buffer on a GPU */
    bool cached;                /* data is r->cache's copy */
};

double runner_mono_now(void);

/*
 * Waits for the prefetch thread's next batch, a little at a time so a stop is seen (and the
 * worker beats). ERR_CANCELLED with e untouched when a stop came first.
 */
int runner_next_batch(const struct train_task *t, struct run *r, struct prefetch_slot *slot,
                      struct err *e);

/* One training step on a batch of rows at data (host memory on the CPU, device memory on a GPU). */
int runner_step(struct run *r, void *data, size_t rows, double max_norm, double *loss_out,
                double *norm_out, struct err *e);

/*
 * The batch feed (runner_feed.c). runner_feed_take: the batch of the next iteration, on a GPU
 * already on the device unless it is not trained on (past the last epoch, or empty);
 * ERR_CANCELLED with e untouched when a stop came first. runner_feed_step: step `it` on b; on
 * a GPU the next batch's copy runs under it, and *waited gets the time spent waiting for the
 * prefetch thread meanwhile.
 */
int runner_feed_take(const struct train_task *t, struct run *r, struct batch *b, struct err *e);
int runner_feed_step(const struct train_task *t, struct run *r, struct batch *b, int64_t it,
                     double *waited, double *loss, double *norm, struct err *e);

#endif
