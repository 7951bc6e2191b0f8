/* predict.h — inference with a finished job's model (predict_*): rebuilt from its final checkpoint, forward only, no tape. */
#ifndef TRAIND_TRAIN_PREDICT_H
#define TRAIND_TRAIN_PREDICT_H

#include <stdint.h>

#include "err.h"
#include "spec.h"

/* The model's input and output widths, from the checkpoint's metadata (a layers stack's from its spec). */
int predict_shape(const struct job_spec *spec, const char *ckpt_path, int64_t *features, int64_t *outputs,
                  struct err *e);

/*
 * out[i * outputs + k] = model(x[i, :])[k] for n rows of features values each (row-major),
 * on the CPU in the job's dtype with the checkpoint's parameters: raw outputs (logits for
 * cross_entropy and bce). ERR_INVALID_ARG when the width does not fit.
 */
int predict_rows(const struct job_spec *spec, const char *ckpt_path, const double *x, int64_t n,
                 int64_t features, double *out, struct err *e);

#endif
