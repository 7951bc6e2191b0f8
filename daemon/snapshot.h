/*
 * snapshot.h — a job's checkpoint files (snapshot_*): the model's parameters as .safetensors
 * (PyTorch state_dict names) with the data cursor in __metadata__, written temp + fsync + rename.
 * The daemon's own format until core's ckpt_ (with optimizer state) lands; it carries no
 * optimizer state, so only a stateless optimizer (SGD without momentum) resumes exactly.
 */
#ifndef TRAIND_DAEMON_SNAPSHOT_H
#define TRAIND_DAEMON_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "dataset.h"
#include "err.h"
#include "nn.h"
#include "spec.h"

/* What a checkpoint says besides the parameters. */
struct snapshot_meta {
    char job_id[17];
    int64_t iterations;               /* done when it was taken: training goes on with this one */
    struct dataset_cursor cursor;     /* the batch the next iteration reads */
};

/* Whether a job of this spec resumes from a checkpoint with exactly an uninterrupted run's losses. */
bool snapshot_resumable(const struct job_spec *s);

/* dir/iter-<iterations>.safetensors */
int snapshot_path(const char *dir, int64_t iterations, char *buf, size_t cap, struct err *e);

/* Writes m's parameters and meta to path (dir created 0700); durable once it returns 0. */
int snapshot_save(const char *path, struct nn_model *m, const struct snapshot_meta *meta, struct err *e);

/* Loads path into m (same names and shapes) and meta. ERR_INVALID_DATA for a file that does not fit. */
int snapshot_load(const char *path, struct nn_model *m, struct snapshot_meta *meta, struct err *e);

#endif
