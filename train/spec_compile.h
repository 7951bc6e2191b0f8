/* spec_compile.h — a parsed job spec turned into the core and storage settings a run is built from. */
#ifndef TRAIND_TRAIN_SPEC_COMPILE_H
#define TRAIND_TRAIN_SPEC_COMPILE_H

#include <stdbool.h>
#include <stdint.h>

#include "dataset.h"
#include "nn.h"
#include "optim.h"
#include "spec.h"
#include "store.h"

struct spec_compiled {
    enum tensor_dtype dtype;        /* the model's, and the batches' (dataset.dtype) */
    enum nn_loss_kind loss;
    enum nn_init_kind init;
    struct optim_config optim;
    /* The training set as the spec reads it; the caller adds remote, data_roots and the
     * settings that are the caller's (resident_limit, parse_threads). */
    struct dataset_config dataset;
    /* S3 settings; what the spec leaves NULL comes from the AWS_* environment. The caller
     * adds cache_dir, cache_limit and http. */
    struct store_remote remote;
    /* An MLP whose outputs the spec leaves to the classes of the first batch (cross_entropy). */
    bool outputs_from_labels;
};

/* Strings in out point into s, which must outlive it. */
void spec_compile(const struct job_spec *s, struct spec_compiled *out);

/*
 * The spec's network on be, for inputs of n_in features, its parameters at zero (nn_init
 * next). n_out: an MLP's outputs, from the spec or the data; the others have their own.
 */
int spec_model_new(const struct job_spec *s, const struct backend *be, enum tensor_dtype dt, int64_t n_in,
                   int64_t n_out, struct nn_model **out, struct err *e);

/*
 * The bytes of the spec's parameters at its dtype, for inputs of n_in features and n_out outputs
 * (0: those the spec gives, else 1), so with n_in 1 the least the data can make them. Saturates
 * at UINT64_MAX.
 */
uint64_t spec_model_bytes(const struct job_spec *s, int64_t n_in, int64_t n_out);

#endif
