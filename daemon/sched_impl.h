/* sched_impl.h — daemon-internal: the scheduler's state, shared by scheduler.c (dispatch, events) and sched_place.c (which job goes to which workers). */
#ifndef TRAIND_DAEMON_SCHED_IMPL_H
#define TRAIND_DAEMON_SCHED_IMPL_H

#include "mpsc.h"
#include "scheduler.h"
#include "task.h"
#include "worker.h"

/* A job's replicas (replica.h): the world their tasks share, freed when the last is done. */
struct replica_group {
    struct train_world *world;
    int left;                         /* tasks not done yet */
};

struct slot {
    struct worker *worker;
    struct task *task;                /* loop thread's view: NULL when idle */
    struct job *job;                  /* NULL when idle, or when the job was failed as stuck */
    enum train_stop stop;             /* why we asked the task to stop */
    bool stuck;                       /* heartbeat timed out; no new jobs until it answers */
    int rank;                         /* of the job's replicas: 0 speaks for the job (and alone) */
    struct replica_group *group;      /* NULL: the job's only task */
};

/* The queue and the workers as next_placed saw them when it last found nothing to start. */
struct sched_seen {
    uint64_t queued_gen;              /* every job queued up to here was looked at and waits */
    uint64_t freed;                   /* slots freed: a freed one may take a job that waited */
    int device_errors;                /* workers whose device failed: list jobs may fail */
};

struct sched {
    uv_async_t doorbell;              /* rung by workers after every push */
    struct mpsc events;
    struct job_registry *reg;
    struct slot *slots;
    int n_slots;
    const char **place_names;         /* n_slots each: next_placed's view of the workers */
    bool *place_idle;
    uint64_t freed;                   /* slots freed so far */
    struct sched_seen walked;         /* what next_placed last found nothing to start under */
    const char *const *data_roots;
    size_t n_data_roots;
    int64_t heartbeat_timeout_ms;
    double allreduce_timeout_s;
    char *state_dir;                  /* NULL: no checkpoints */
    const char *cache_dir;
    uint64_t cache_limit;
    struct store_list_limits list_limits;
    bool stopping;                    /* no more dispatching */
    void (*drained)(void *ctx);       /* set while a drain waits for running jobs */
    void *drained_ctx;
    sched_listener_fn listener;
    void *listener_ctx;
    const struct devices_info *devices; /* NULL: CPU workers only */
    struct world *world;              /* NULL: this process is the whole world */
};

/* Tells the listener that j changed. */
void sched_notify(struct sched *s, struct job *j);

/*
 * The queued job to start now, the replicas it runs as (*n) and their workers' slots (to[r]
 * for replica r, SPEC_MAX_REPLICAS of room), or NULL; jobs no worker will ever run are failed
 * on the way.
 */
struct job *sched_next_placed(struct sched *s, size_t *to, int *n);

#endif
