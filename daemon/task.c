/* task.c — a worker's job: train_run's hooks become events in the loop thread's queue. */
#include "task.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

struct task *task_new(const struct job_spec *spec, const char *const *data_roots, size_t n_data_roots,
                      void *owner)
{
    struct task *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->done = calloc(1, sizeof *t->done);
    if (!t->done) {
        free(t);
        return NULL;
    }
    t->spec = spec;
    t->data_roots = data_roots;
    t->n_data_roots = n_data_roots;
    t->owner = owner;
    atomic_init(&t->stop, TRAIN_RUN);
    atomic_init(&t->abort_io, false);
    atomic_init(&t->in_flight, 0);
    t->done->kind = TASK_EV_DONE;
    t->done->task = t;
    t->init_fd = -1;
    return t;
}

void task_free(struct task *t)
{
    if (!t)
        return;
    task_event_free(t->done);
    free(t->ckpt_dir);
    free(t->resume_from);
    if (t->init_fd >= 0)
        close(t->init_fd);
    free(t);
}

void task_event_free(struct task_event *ev)
{
    if (!ev)
        return;
    job_params_free(ev->params);
    free(ev->path);
    free(ev);
}

static void on_metrics(void *ctx, const struct metrics_row *row, const struct train_progress *p)
{
    struct task *t = ctx;
    /* Backpressure: the loop thread applies rows (and writes them to SQLite) at its own pace. */
    while (atomic_load(&t->in_flight) >= TASK_MAX_IN_FLIGHT && atomic_load(&t->stop) == TRAIN_RUN) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 200 * 1000};
        nanosleep(&ts, NULL);
    }
    struct task_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return; /* a lost row under memory pressure beats a lost job */
    ev->kind = TASK_EV_METRICS;
    ev->task = t;
    ev->row = *row;
    ev->epoch = p->epoch;
    ev->iterations = p->planned;
    ev->bytes_fetched = p->bytes_fetched;
    ev->bytes_total = p->bytes_total;
    atomic_fetch_add(&t->in_flight, 1);
    t->emit(t->emit_ctx, ev);
}

/* The loop thread records the checkpoint and then removes the older files. */
static void on_checkpoint(void *ctx, const char *path, int64_t iterations, uint64_t epoch)
{
    struct task *t = ctx;
    struct task_event *ev = calloc(1, sizeof *ev);
    if (!ev || !(ev->path = strdup(path))) {
        free(ev);
        /* Not recorded: resuming uses the older one, and the next start sweeps this file. */
        log_warn("job %s: checkpoint at iteration %lld not recorded: out of memory", t->job_id,
                 (long long)iterations);
        return;
    }
    ev->kind = TASK_EV_CHECKPOINT;
    ev->task = t;
    ev->iterations = iterations;
    ev->epoch = epoch;
    t->emit(t->emit_ctx, ev);
}

static void on_done(void *ctx, const struct err *e, struct job_params *params)
{
    struct task *t = ctx;
    struct task_event *done = t->done;
    t->done = NULL; /* ownership moves to the receiver with the event */
    done->err = *e;
    done->params = params;
    t->emit(t->emit_ctx, done);
}

void task_run(struct task *t, struct wdev *dev, const struct err *dev_error, atomic_llong *heartbeat)
{
    struct train_plan plan = {
        .spec = t->spec,
        .job_id = t->job_id,
        .data_roots = t->data_roots,
        .n_data_roots = t->n_data_roots,
        .cache_dir = t->cache_dir,
        .cache_limit = t->cache_limit,
        .list_limits = t->list_limits,
        .ckpt_dir = t->ckpt_dir,
        .resume_from = t->resume_from,
        .init_fd = t->init_fd,
        .dev = dev,
        .dev_error = dev_error,
        .world = t->world,
        .rank = t->rank,
    };
    struct train_hooks hooks = {
        .ctx = t,
        .metrics = on_metrics,
        .checkpoint = on_checkpoint,
        .done = on_done,
        .stop = &t->stop,
        .abort_io = &t->abort_io,
        .heartbeat = heartbeat,
    };
    train_run(&plan, &hooks);
}
