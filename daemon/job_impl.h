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
    struct metrics_row last;           /* the latest row */
    struct metrics_row at_ckpt;        /* the row before the latest checkpoint; iteration -1: unknown */
    int64_t eval_it;                   /* the latest row with an eval_loss, kept or not; -1: none */
    double eval_loss;
    int64_t ckpt_eval_it;              /* the latest evaluation when the checkpoint was taken */
    double ckpt_eval_loss;
    char *raw_spec;                    /* an unreadable row's stored spec; spec is then a stand-in */
    struct job_params *params;
    struct job_checkpoint ckpt;        /* the latest; path NULL when none */
    uint64_t epoch;                    /* the data cursor's epoch after the latest row (epoch_seen) */
    bool epoch_seen;                   /* false: the latest checkpoint's (or 0) stands for it */
    int64_t iterations_planned;        /* an epochs job's total once the data's size is known; 0 before */
};

double job_mono_now(void);

#endif
