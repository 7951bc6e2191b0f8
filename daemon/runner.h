/* runner.h — the training loop of one job, run on a worker thread; talks back only through events. */
#ifndef TRAIND_DAEMON_RUNNER_H
#define TRAIND_DAEMON_RUNNER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "job.h"
#include "mpsc.h"
#include "spec.h"

enum runner_event_kind { RUNNER_EV_METRICS, RUNNER_EV_DONE };

/* What a runner tells the loop thread; whoever receives one frees it with runner_event_free. */
struct runner_event {
    struct mpsc_node node;            /* first: events travel through an mpsc queue */
    enum runner_event_kind kind;
    struct runner_task *task;
    struct metrics_row row;           /* METRICS */
    struct err err;                   /* DONE: ERR_OK, ERR_CANCELLED, or why it failed */
    struct job_params *params;        /* DONE and succeeded: the final parameters */
};

struct runner_task {
    const struct job_spec *spec;      /* borrowed; immutable while the job runs */
    const char *const *data_roots;    /* file reads are confined below these */
    size_t n_data_roots;
    atomic_bool cancel;               /* set by any thread; checked between steps */
    /* Hands an event over (takes ownership). Called from the worker thread. */
    void (*emit)(void *ctx, struct runner_event *ev);
    void *emit_ctx;
    void *owner;                      /* the job, opaque to the runner */
    struct runner_event *done;        /* allocated up front so the last word is never lost */
};

/* A task ready to run (done allocated). NULL on out of memory. */
struct runner_task *runner_task_new(const struct job_spec *spec, const char *const *data_roots,
                                    size_t n_data_roots, void *owner);
void runner_task_free(struct runner_task *t);
void runner_event_free(struct runner_event *ev);

/*
 * Trains t->spec to the end, emitting one METRICS event per iteration and exactly
 * one DONE event (t->done) last; after emitting DONE it touches t no more.
 */
void runner_run(struct runner_task *t);

#endif
