/* scheduler.c — dispatch of queued jobs to workers (sched_*) and the doorbell through which workers report back. */
#include "scheduler.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "mpsc.h"
#include "runner.h"
#include "worker.h"

struct slot {
    struct worker *worker;
    struct runner_task *task;         /* loop thread's view: NULL when idle */
    struct job *job;
};

struct sched {
    uv_async_t doorbell;              /* rung by workers after every push */
    struct mpsc events;
    struct job_registry *reg;
    struct slot *slots;
    int n_slots;
    const char *const *data_roots;
    size_t n_data_roots;
    bool stopping;
    sched_listener_fn listener;
    void *listener_ctx;
};

void sched_set_listener(struct sched *s, sched_listener_fn fn, void *ctx)
{
    s->listener = fn;
    s->listener_ctx = ctx;
}

static void notify(struct sched *s, struct job *j)
{
    if (s->listener)
        s->listener(s->listener_ctx, j);
}

/* Worker thread: queue the event, then ring (uv_async_send is the one thread-safe uv call). */
static void emit(void *ctx, struct runner_event *ev)
{
    struct sched *s = ctx;
    mpsc_push(&s->events, &ev->node);
    uv_async_send(&s->doorbell);
}

static struct slot *slot_of(struct sched *s, const struct runner_task *t)
{
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].task == t)
            return &s->slots[i];
    return NULL;
}

static void apply(struct sched *s, struct runner_event *ev)
{
    struct slot *sl = slot_of(s, ev->task);
    if (!sl) {
        log_error("event for a task no worker runs; dropped");
        runner_event_free(ev);
        return;
    }
    if (ev->kind == RUNNER_EV_METRICS) {
        struct err e = {0};
        if (job_append_metrics(sl->job, &ev->row, &e))
            log_warn("%s", e.msg);
        runner_event_free(ev);
        notify(s, sl->job);
        return;
    }
    struct job *j = sl->job;
    job_finish(j, ev->err.code, ev->err.msg, ev->params);
    ev->params = NULL;
    if (ev->err.code == ERR_OK)
        log_info("job %s succeeded", job_id(j));
    else if (ev->err.code == ERR_CANCELLED)
        log_info("job %s %s", job_id(j), ev->err.msg);
    else
        log_info("job %s %s: %s: %s", job_id(j), job_state_name(job_state(j)),
                 job_error_code_name(ev->err.code), ev->err.msg);
    runner_task_free(sl->task);
    sl->task = NULL;
    sl->job = NULL;
    runner_event_free(ev);
    notify(s, j);
}

/* The doorbell coalesces rings, so drain everything that is there. */
static void drain(struct sched *s)
{
    struct mpsc_node *n;
    while ((n = mpsc_pop(&s->events)))
        apply(s, (struct runner_event *)n);
}

static void on_doorbell(uv_async_t *h)
{
    struct sched *s = h->data;
    drain(s);
    sched_kick(s);
}

void sched_kick(struct sched *s)
{
    if (s->stopping)
        return;
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->task)
            continue;
        struct job *j = job_registry_next_queued(s->reg);
        if (!j)
            return;
        struct runner_task *t = runner_task_new(job_spec(j), s->data_roots, s->n_data_roots, j);
        if (!t) {
            job_finish(j, ERR_NOMEM, "out of memory starting the job", NULL);
            continue;
        }
        t->emit = emit;
        t->emit_ctx = s;
        sl->task = t;
        sl->job = j;
        job_mark_running(j, worker_device(sl->worker));
        log_info("job %s started on %s", job_id(j), worker_device(sl->worker));
        worker_assign(sl->worker, t);
    }
}

int sched_cancel(struct sched *s, struct job *j)
{
    enum job_state st = job_state(j);
    if (st == JOB_QUEUED) {
        job_finish(j, ERR_CANCELLED, NULL, NULL);
        notify(s, j);
        return 0;
    }
    if (st != JOB_RUNNING)
        return -1;
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job == j)
            atomic_store(&s->slots[i].task->cancel, true);
    return 0;
}

int sched_start(uv_loop_t *loop, struct job_registry *reg, const struct sched_config *cfg,
                struct sched **out, struct err *e)
{
    struct sched *s = calloc(1, sizeof *s);
    int n = cfg->cpu_workers > 0 ? cfg->cpu_workers : 1;
    if (!s || !(s->slots = calloc((size_t)n, sizeof *s->slots))) {
        free(s);
        return err_set(e, ERR_NOMEM, "scheduler: out of memory");
    }
    s->reg = reg;
    s->data_roots = cfg->data_roots;
    s->n_data_roots = cfg->n_data_roots;
    mpsc_init(&s->events);
    int rc = uv_async_init(loop, &s->doorbell, on_doorbell);
    if (rc) {
        free(s->slots);
        free(s);
        return err_set(e, ERR_INTERNAL, "uv_async_init: %s", uv_strerror(rc));
    }
    s->doorbell.data = s;
    for (int i = 0; i < n; i++, s->n_slots++) {
        char name[16];
        snprintf(name, sizeof name, n == 1 ? "cpu" : "cpu:%d", i);
        if (worker_start(name, &s->slots[i].worker, e)) {
            sched_shutdown(s);
            /* The caller runs the loop to close the doorbell, then frees s. */
            *out = s;
            return e->code;
        }
    }
    *out = s;
    return 0;
}

void sched_shutdown(struct sched *s)
{
    if (!s || s->stopping)
        return;
    s->stopping = true;
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].task)
            atomic_store(&s->slots[i].task->cancel, true);
    for (int i = 0; i < s->n_slots; i++)
        worker_stop(s->slots[i].worker);
    /* Every worker has emitted its DONE by now; apply them so the jobs end in a terminal state. */
    drain(s);
    uv_close((uv_handle_t *)&s->doorbell, NULL);
}

void sched_free(struct sched *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_slots; i++) {
        worker_free(s->slots[i].worker);
        runner_task_free(s->slots[i].task);
    }
    free(s->slots);
    free(s);
}
