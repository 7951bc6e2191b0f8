/* scheduler.h — the scheduler (sched_*): hands queued jobs to idle workers and applies their events, on the loop thread. */
#ifndef TRAIND_DAEMON_SCHEDULER_H
#define TRAIND_DAEMON_SCHEDULER_H

#include <stddef.h>

#include <uv.h>

#include "err.h"
#include "job.h"

struct sched_config {
    int cpu_workers;                  /* at least 1 */
    const char *const *data_roots;    /* must outlive the scheduler */
    size_t n_data_roots;
};

struct sched;

int sched_start(uv_loop_t *loop, struct job_registry *reg, const struct sched_config *cfg,
                struct sched **out, struct err *e);

/*
 * Called on the loop thread whenever a job gets a metrics row or changes state
 * (the API wakes long-polling requests with it). One listener; NULL removes it.
 */
typedef void (*sched_listener_fn)(void *ctx, struct job *j);
void sched_set_listener(struct sched *s, sched_listener_fn fn, void *ctx);

/* Starts queued jobs on idle workers; call after adding a job to the registry. */
void sched_kick(struct sched *s);

/*
 * Cancels a job: a queued one at once, a running one at its next step boundary.
 * Returns 0, or -1 when the job is already in a terminal state.
 */
int sched_cancel(struct sched *s, struct job *j);

/*
 * Stops for good: no more dispatching, running jobs cancelled at their next step,
 * worker threads joined, pending events applied, the doorbell handle closed.
 * Free with sched_free once the loop has run the close callbacks.
 */
void sched_shutdown(struct sched *s);
void sched_free(struct sched *s);

#endif
