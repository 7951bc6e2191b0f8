/* job_impl.h — struct job's fields, shared by job.c (state) and job_json.c (rendering) only. */
#ifndef TRAIND_DAEMON_JOB_IMPL_H
#define TRAIND_DAEMON_JOB_IMPL_H

#include <stdbool.h>

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
    struct job_params *params;
    struct job_checkpoint ckpt;        /* the latest; path NULL when none */
    uint64_t epoch;                    /* the data cursor's epoch after the latest row (epoch_seen) */
    bool epoch_seen;                   /* false: the latest checkpoint's (or 0) stands for it */
    int64_t iterations_planned;        /* an epochs job's total once the data's size is known; 0 before */
};

double job_mono_now(void);

#endif
