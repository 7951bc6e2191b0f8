/*
 * init_from.h — a job's initial parameters from init {"from": ...}: the checkpoint of another
 * job (a file the caller found and opened), or a .safetensors file by URL or path. Only the
 * parameters are loaded, as model.load_state_dict(torch.load(...)) does: the job still starts
 * at iteration 0 with a fresh optimizer and data cursor.
 */
#ifndef TRAIND_TRAIN_INIT_FROM_H
#define TRAIND_TRAIN_INIT_FROM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "nn.h"
#include "spec.h"

/* Where a URL may be read from: the dataset's rules (data roots, S3 settings, cancel flag). */
struct init_from_access {
    const char *const *data_roots;
    size_t n_data_roots;
    const char *cache_dir;          /* downloads are kept there as data partitions are; NULL: none */
    uint64_t cache_limit;
    const atomic_bool *cancel;      /* a stop interrupts the download */
};

/*
 * Loads m's parameters from fd (another job's checkpoint, opened by the caller when
 * s->init_from names a job), or else from s->init_from's URL. A key or shape that does not fit the model fails with
 * ERR_INVALID_ARG naming it (the spec does not fit the file).
 */
int init_from_load(const struct job_spec *s, int fd, const struct init_from_access *acc,
                   struct nn_model *m, struct err *e);

#endif
