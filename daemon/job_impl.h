/* job_impl.h — struct job's fields, shared by job.c (state) and job_json.c (rendering) only. */
#ifndef TRAIND_DAEMON_JOB_IMPL_H
#define TRAIND_DAEMON_JOB_IMPL_H

#include "job.h"

struct job_checkpoint {
    int64_t iterations;                /* iterations done when it was taken */
    uint64_t epoch;
    char *path;
};

struct job {
    char id[17];
    struct job_registry *reg;
    enum job_state state;
    struct job_spec *spec;
    char device[16];
    double created_at, started_at, finished_at;   /* Unix seconds; 0 = not yet */
    double run_t0;                     /* monotonic start of this run, for eta_s */
    int64_t run_it0;                   /* iterations done when this run started */
    int64_t iterations_done;
    struct err error;
    struct metrics_row *rows;          /* every keep_every-th iteration, in order */
    size_t n_rows, cap_rows;
    int64_t keep_every;                /* 1 until a job outgrows JOB_METRICS_MAX_ROWS */
    struct metrics_row last;           /* always the latest row, kept or not */
    int64_t eval_it;                   /* the latest row with an eval_loss, kept or not; -1: none */
    double eval_loss;
    struct job_params *params;
    struct job_checkpoint ckpt;        /* the latest; path NULL when none */
};

double job_mono_now(void);

#endif
