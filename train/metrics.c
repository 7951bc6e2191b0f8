/* metrics.c — the metric columns' names and freeing reported parameters. */
#include "metrics.h"

#include <stdlib.h>

const char *const job_metric_columns[METRIC_NCOLS] = {
    "iteration", "time", "loss", "seconds_per_iteration",
    "samples_per_second", "data_wait_seconds", "grad_norm", "lr", "eval_loss",
};

void job_params_free(struct job_params *ps)
{
    if (!ps)
        return;
    for (int i = 0; i < ps->n; i++)
        free(ps->p[i].values);
    free(ps->p);
    free(ps);
}
