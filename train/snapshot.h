/*
 * snapshot.h — a job's checkpoint files (snapshot_*): core's .safetensors checkpoints (model
 * and optimizer state, PyTorch state_dict names) with the run's metadata: job id, the
 * iterations done, the data cursor, and the model's input and output widths.
 */
#ifndef TRAIND_TRAIN_SNAPSHOT_H
#define TRAIND_TRAIN_SNAPSHOT_H

#include <stdint.h>

#include "dataset.h"
#include "err.h"
#include "nn.h"
#include "optim.h"

struct snapshot_meta {
    char job_id[17];
    int64_t iterations;               /* done when it was taken: training goes on with this one */
    struct dataset_cursor cursor;     /* the batch the next iteration reads */
    int64_t features, outputs;        /* the model's input and output widths */
    int64_t epoch_iterations;         /* batches of an epoch (0: not known when it was taken) */
};

/* dir/iter-<iterations>.safetensors */
int snapshot_path(const char *dir, int64_t iterations, char *buf, size_t cap, struct err *e);

/* Writes m, o's state and meta to path (dir created 0700): temp file, fsync, rename. */
int snapshot_save(const char *path, struct nn_model *m, struct optim *o, const struct snapshot_meta *meta,
                  struct err *e);

/* Loads path into m and o (o may be NULL: parameters only) and meta (may be NULL). */
int snapshot_load(const char *path, struct nn_model *m, struct optim *o, struct snapshot_meta *meta,
                  struct err *e);

/*
 * Removes every file in dir but keep (a checkpoint path, or NULL to keep none): the temp files
 * of writes a kill cut short, and checkpoints the database never recorded or had replaced
 * when traind stopped before removing them. A missing dir is fine. *removed says how many went.
 * Only while no task writes to dir.
 */
int snapshot_sweep(const char *dir, const char *keep, int *removed, struct err *e);

/* Only the metadata, without a model to load into (to build one of the right shape first). */
int snapshot_peek(const char *path, struct snapshot_meta *meta, struct err *e);

#endif
