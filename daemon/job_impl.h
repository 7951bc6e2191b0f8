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

/* Where a kept row's JSON text lies in its job's text arena. */
struct job_row_span {
    size_t off, len;
};

/* The longest JSON text of one metrics row: "[", 17-digit numbers or null, ",", "]". */
#define JOB_ROW_TEXT_MAX (METRIC_NCOLS * 26 + 4)

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
    /*
     * Each kept row's JSON text, rendered once when the row arrives: the loop thread answers
     * every poller of /metrics by copying text, not by formatting numbers per request.
     */
    struct job_row_span *spans;        /* one per kept row, cap_rows of them */
    char *text;
    size_t text_len, text_cap;
    int64_t eval_it;                   /* the latest row with an eval_loss, kept or not; -1: none */
    double eval_loss;
    struct job_params *params;
    struct job_checkpoint ckpt;        /* the latest; path NULL when none */
    uint64_t epoch;                    /* the data cursor's epoch after the latest row (epoch_seen) */
    bool epoch_seen;                   /* false: the latest checkpoint's (or 0) stands for it */
    int64_t iterations_planned;        /* an epochs job's total once the data's size is known; 0 before */
};

double job_mono_now(void);

/* Writes row's JSON array text into buf (JOB_ROW_TEXT_MAX bytes); returns its length. */
size_t job_row_text(const struct metrics_row *row, char *buf);

#endif
