/*
 * init_from.h — a job's initial parameters from init {"from": ...}: the latest
 * checkpoint of another job of this daemon, or a .safetensors file by URL or path. Only the
 * parameters are loaded, as model.load_state_dict(torch.load(...)) does: the job still starts
 * at iteration 0 with a fresh optimizer and data cursor.
 */
#ifndef TRAIND_DAEMON_INIT_FROM_H
#define TRAIND_DAEMON_INIT_FROM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "job.h"
#include "nn.h"
#include "spec.h"

/*
 * Submit time, on the loop thread: a job id must name a job of reg that has a checkpoint
 * now. 0 (also for a URL, checked when the job starts), or -1 with se (field init.from).
 */
int init_from_check(const struct job_registry *reg, const struct job_spec *s, struct spec_error *se);

/*
 * Start time, on the loop thread: opens the latest checkpoint of the job s names, so the
 * file stays readable when that job replaces or deletes it meanwhile. *fd is -1 when s
 * names no job. ERR_INVALID_ARG when the job or its checkpoint is gone.
 */
int init_from_open(const struct job_registry *reg, const struct job_spec *s, int *fd, struct err *e);

/* Where a URL may be read from: the dataset's rules (data roots, S3 settings, cancel flag). */
struct init_from_access {
    const char *const *data_roots;
    size_t n_data_roots;
    const char *cache_dir;          /* downloads are kept there as data partitions are; NULL: none */
    uint64_t cache_limit;
    const atomic_bool *cancel;      /* a stop interrupts the download */
};

/*
 * On the worker: loads m's parameters from fd (a job's checkpoint, from init_from_open)
 * or else from s->init_from's URL. A key or shape that does not fit the model fails with
 * ERR_INVALID_ARG naming it (the spec does not fit the file).
 */
int init_from_load(const struct job_spec *s, int fd, const struct init_from_access *acc,
                   struct nn_model *m, struct err *e);

#endif
