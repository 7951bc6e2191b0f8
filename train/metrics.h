/*
 * metrics.h — what the training engine reports: one metrics row per iteration (its columns and
 * their names) and a model's final parameters copied to the host.
 */
#ifndef TRAIND_TRAIN_METRICS_H
#define TRAIND_TRAIN_METRICS_H

#include <stdint.h>

/*
 * Metric columns, in the order of docs/api.md and of every metrics row. eval_loss is the
 * mean loss over the whole data.test after that iteration's step, NAN (JSON null) on the
 * iterations where no evaluation ran.
 */
enum metrics_col {
    METRIC_ITERATION, METRIC_TIME, METRIC_LOSS, METRIC_SECONDS_PER_ITERATION,
    METRIC_SAMPLES_PER_SECOND, METRIC_DATA_WAIT_SECONDS, METRIC_GRAD_NORM, METRIC_LR,
    METRIC_EVAL_LOSS, METRIC_NCOLS
};

/* The columns' names, as the API and the history write them. */
extern const char *const job_metric_columns[METRIC_NCOLS];

struct metrics_row {
    double v[METRIC_NCOLS]; /* v[METRIC_ITERATION] holds an integer; time is Unix seconds */
};

/* Final parameters of a model, copied to the host: one 2-D (or 1-D, cols 0) array each. */
struct job_param {
    char name[32];
    int64_t rows, cols;
    double *values;
};

struct job_params {
    int n;
    struct job_param *p;
};

void job_params_free(struct job_params *ps);   /* NULL is fine */

#endif
