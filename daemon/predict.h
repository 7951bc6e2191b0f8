/* predict.h — inference with a finished job's parameters (predict_*): forward only, no tape. */
#ifndef TRAIND_DAEMON_PREDICT_H
#define TRAIND_DAEMON_PREDICT_H

#include <stdint.h>

#include "err.h"
#include "job.h"

/* Input width the parameters expect (rows of the linear model's w), or -1 if unknown. */
int64_t predict_num_features(const struct job_params *ps);

/*
 * out[i] = model(x[i, :]) for n rows of features values each (row-major), on the CPU
 * in float64 with the job's parameters. ERR_INVALID_ARG when the width does not fit.
 */
int predict_rows(const struct job_params *ps, const double *x, int64_t n, int64_t features,
                 double *out, struct err *e);

#endif
