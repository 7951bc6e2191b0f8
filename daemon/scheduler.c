/* scheduler.c — dispatch of queued jobs to workers (sched_*) and the doorbell through which workers report back. */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "init_job.h"
#include "log.h"
#include "mpsc.h"
#include "placement.h"
#include "snapshot.h"
#include "task.h"
#include "worker.h"

#define SCHED_EVENTS_PER_TURN 512

struct slot {
    struct worker *worker;
    struct task *task;                /* loop thread's view: NULL when idle */
    struct job *job;                  /* NULL when idle, or when the job was failed as stuck */
    enum train_stop stop;             /* why we asked the task to stop */
    bool stuck;                       /* heartbeat timed out; no new jobs until it answers */
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
    char *state_dir;                  /* NULL: no checkpoints */
    const char *cache_dir;
    uint64_t cache_limit;
    bool stopping;                    /* no more dispatching */
    void (*drained)(void *ctx);       /* set while a drain waits for running jobs */
    void *drained_ctx;
    sched_listener_fn listener;
    void *listener_ctx;
    const struct devices_info *devices; /* NULL: CPU workers only */
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
static void emit(void *ctx, struct task_event *ev)
{
    struct sched *s = ctx;
    mpsc_push(&s->events, &ev->node);
    uv_async_send(&s->doorbell);
}

static struct slot *slot_of_task(struct sched *s, const struct task *t)
{
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].task == t)
            return &s->slots[i];
    return NULL;
}

static struct slot *slot_of_job(struct sched *s, const struct job *j)
{
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job == j)
            return &s->slots[i];
    return NULL;
}

static int running_count(const struct sched *s)
{
    int n = 0;
    for (int i = 0; i < s->n_slots; i++)
        n += s->slots[i].task != NULL && s->slots[i].job != NULL;
    return n;
}

/* Where a stopped job goes on from: its latest checkpoint (model, optimizer, data cursor), or the start. */
static int64_t resume_point(const struct job *j)
{
    int64_t it = job_latest_checkpoint(j, NULL, NULL);
    return it > 0 ? it : 0;
}

/* A task's last word: the job ends, or goes back to the queue or to paused when we stopped it. */
/* A job's error names files relative to the state dir and the data roots: clients are not told
 * where the server keeps them (the log, for the operator, keeps the full paths). */
static void client_message(const struct sched *s, const struct err *full, struct err *out)
{
    *out = *full;
    err_relative_to(out, s->state_dir);
    for (size_t i = 0; i < s->n_data_roots; i++)
        err_relative_to(out, s->data_roots[i]);
}

static void finish_job(const struct sched *s, struct job *j, enum train_stop stop,
                       const struct task_event *ev, struct job_params *params)
{
    if (ev->err.code == ERR_CANCELLED && (stop == TRAIN_STOP_PREEMPT || stop == TRAIN_STOP_PAUSE)) {
        int64_t from = resume_point(j);
        if (stop == TRAIN_STOP_PAUSE)
            job_pause(j, from);
        else
            job_requeue(j, from);
        log_info("job %s %s; it goes on from iteration %lld", job_id(j),
                 stop == TRAIN_STOP_PAUSE ? "paused" : "stopped for shutdown", (long long)from);
        job_params_free(params);
        return;
    }
    struct err shown;
    client_message(s, &ev->err, &shown);
    job_finish(j, shown.code, shown.msg, params);
    if (ev->err.code == ERR_OK)
        log_info("job %s succeeded", job_id(j));
    else if (ev->err.code == ERR_CANCELLED)
        log_info("job %s %s", job_id(j), ev->err.msg);
    else
        log_info("job %s %s: %s: %s", job_id(j), job_state_name(job_state(j)),
                 job_error_code_name(ev->err.code), ev->err.msg);
}

static void apply(struct sched *s, struct task_event *ev)
{
    struct slot *sl = slot_of_task(s, ev->task);
    if (!sl) {
        log_error("event for a task no worker runs; dropped");
        task_event_free(ev);
        return;
    }
    struct job *j = sl->job;
    if (ev->kind == TASK_EV_CHECKPOINT) {
        struct err e = {0};
        if (j && job_add_checkpoint(j, ev->iterations, ev->epoch, ev->path, &e))
            log_warn("%s", e.msg);
        task_event_free(ev);
        return;
    }
    if (ev->kind == TASK_EV_METRICS) {
        atomic_fetch_sub(&ev->task->in_flight, 1);
        struct err e = {0};
        if (j && !job_is_terminal(job_state(j)))
            job_set_progress(j, ev->epoch, ev->iterations);
        if (j && job_append_metrics(j, &ev->row, &e))
            log_warn("%s", e.msg);
        task_event_free(ev);
        if (j)
            notify(s, j);
        return;
    }
    if (sl->stuck)
        log_warn("worker %s answered again; it takes jobs again", worker_device(sl->worker));
    if (j)
        finish_job(s, j, sl->stop, ev, ev->params);
    ev->params = NULL;
    task_free(sl->task);
    *sl = (struct slot){.worker = sl->worker};
    s->freed++;
    task_event_free(ev);
    if (j)
        notify(s, j);
}

/*
 * The doorbell coalesces rings, so drain what is there: at most max events (0: all),
 * so fast producers cannot keep the loop thread from serving HTTP. Returns true when
 * it stopped at max (more may be waiting).
 */
static bool drain_events(struct sched *s, size_t max)
{
    struct mpsc_node *n;
    for (size_t k = 0; !max || k < max; k++) {
        if (!(n = mpsc_pop(&s->events)))
            return false;
        apply(s, (struct task_event *)n);
    }
    return true;
}

static void check_drained(struct sched *s)
{
    if (s->drained && running_count(s) == 0) {
        void (*done)(void *) = s->drained;
        s->drained = NULL;
        done(s->drained_ctx);
    }
}

static void on_doorbell(uv_async_t *h)
{
    struct sched *s = h->data;
    if (drain_events(s, SCHED_EVENTS_PER_TURN))
        uv_async_send(&s->doorbell);   /* the rest on the next loop turn, after pending I/O */
    sched_kick(s);
    check_drained(s);
}

/* Where the task writes checkpoints, and the one it goes on from (matching the job's progress). */
static int plan_checkpoints(struct sched *s, struct job *j, struct task *t)
{
    snprintf(t->job_id, sizeof t->job_id, "%s", job_id(j));
    t->cache_dir = s->cache_dir;
    t->cache_limit = s->cache_limit;
    if (!s->state_dir)
        return 0;
    size_t n = strlen(s->state_dir) + 64;
    if (!(t->ckpt_dir = malloc(n)))
        return -1;
    snprintf(t->ckpt_dir, n, "%s/checkpoints/%s", s->state_dir, job_id(j));
    const char *path = NULL;
    int64_t it = job_latest_checkpoint(j, NULL, &path);
    if (it <= 0 || it != job_iterations_done(j))
        return 0;
    if (access(path, R_OK) != 0) {
        log_warn("job %s: its checkpoint %s is gone; it starts over", job_id(j), path);
        job_requeue(j, 0);
        return 0;
    }
    return (t->resume_from = strdup(path)) ? 0 : -1;
}

/*
 * A fresh start with init.from naming a job: its latest checkpoint, opened now so that job
 * replacing or deleting the file meanwhile does not matter. Fails j (invalid_spec) when gone.
 */
static int plan_init(struct sched *s, struct job *j, struct task *t)
{
    struct err e = {0};
    if (t->resume_from || !init_from_open(s->reg, job_spec(j), &t->init_fd, &e))
        return 0;
    struct err shown;
    client_message(s, &e, &shown);
    job_finish(j, shown.code, shown.msg, NULL);
    log_info("job %s failed: %s", job_id(j), e.msg);
    notify(s, j);
    return -1;
}

/*
 * A list job is not offered GPUs whose backend failed, so with every worker it may use
 * failed it would wait for ever: it fails instead, as a job naming one of them does.
 */
static enum place_result unless_all_failed(struct sched *s, const struct job_spec *spec, char *why,
                                           size_t cap)
{
    const struct err *failed = NULL;
    for (int k = 0; k < s->n_slots; k++) {
        if (!place_allows(spec, worker_device(s->slots[k].worker)))
            continue;
        const struct err *de = worker_device_error(s->slots[k].worker);
        if (!de)
            return PLACE_WAIT;
        failed = failed ? failed : de;
    }
    if (!failed)
        return PLACE_WAIT;
    snprintf(why, cap, "%s", failed->msg[0] ? failed->msg : "every device of the list failed");
    return PLACE_NO_DEVICE;
}

/* A GPU this machine has but --gpus leaves out is not "no such GPU": say why it is missing. */
static void explain_left_out(const struct sched *s, const struct job_spec *spec, char *why, size_t cap)
{
    if (!s->devices || (spec->device != SPEC_DEVICE_CUDA && spec->device != SPEC_DEVICE_LIST))
        return;
    for (int i = 0; i < s->devices->n_gpus; i++) {
        const struct devices_gpu *g = &s->devices->gpus[i];
        char name[16];
        snprintf(name, sizeof name, "cuda:%d", g->index);
        if (!g->used && place_allows(spec, name)) {
            snprintf(why, cap, "%s: traind does not use this GPU (--gpus leaves it out)", name);
            return;
        }
    }
}

/* The first idle worker j may run (PLACE_OK, *w), or why it waits or never runs. */
static enum place_result place(struct sched *s, struct job *j, size_t *w, char *why, size_t cap)
{
    /* A GPU whose backend failed takes only jobs that name it (they fail, saying why). */
    for (int k = 0; k < s->n_slots; k++)
        s->place_idle[k] = !s->slots[k].task && (job_spec(j)->device == SPEC_DEVICE_CUDA ||
                                                 !worker_device_error(s->slots[k].worker));
    enum place_result pr = place_job(job_spec(j), s->place_names, s->place_idle, (size_t)s->n_slots, w,
                                     why, cap);
    if (pr == PLACE_WAIT && job_spec(j)->device == SPEC_DEVICE_LIST)
        pr = unless_all_failed(s, job_spec(j), why, cap);
    return pr;
}

static bool any_slot_free(const struct sched *s)
{
    for (int i = 0; i < s->n_slots; i++)
        if (!s->slots[i].task)
            return true;
    return false;
}

/* Fails j, which no worker will ever run, saying why. */
static void fail_unplaceable(struct sched *s, struct job *j, char *why, size_t cap)
{
    explain_left_out(s, job_spec(j), why, cap);
    job_finish(j, ERR_DEVICE, why, NULL);
    log_info("job %s failed: %s", job_id(j), why);
    notify(s, j);
}

static int device_errors(const struct sched *s)
{
    int n = 0;
    for (int i = 0; i < s->n_slots; i++)
        n += worker_device_error(s->slots[i].worker) != NULL;
    return n;
}

/*
 * The jobs queued since the last fruitless walk, when nothing else changed: the others still
 * wait, so the first of these that can start is the one. Those none can run fail.
 */
static struct job *next_arrival(struct sched *s, struct slot **to)
{
    uint64_t since = s->walked.queued_gen;
    struct job *best = NULL;
    for (struct job *j = job_registry_queued_since(s->reg, since), *next; j; j = next) {
        next = job_registry_queued_since_next(s->reg, j, since);
        size_t w;
        char why[256];
        enum place_result pr = place(s, j, &w, why, sizeof why);
        if (pr == PLACE_NO_DEVICE)
            fail_unplaceable(s, j, why, sizeof why);
        else if (pr == PLACE_OK && (!best || job_runs_before(j, best))) {
            best = j;
            *to = &s->slots[w];
        }
    }
    return best;
}

/* Every queued job in run order: the first that can start; those none can run fail. */
static struct job *next_in_queue(struct sched *s, struct slot **to)
{
    for (struct job *j = job_registry_next_queued(s->reg), *next; j; j = next) {
        next = job_registry_queued_after(s->reg, j);
        size_t w;
        char why[256];
        enum place_result pr = place(s, j, &w, why, sizeof why);
        if (pr == PLACE_OK) {
            *to = &s->slots[w];
            return j;
        }
        if (pr == PLACE_NO_DEVICE)
            fail_unplaceable(s, j, why, sizeof why);
    }
    return NULL;
}

/*
 * The queued job to start now and its worker: the first, in the registry's queue order
 * (highest priority, then oldest), that some idle worker may run. Jobs no worker will ever
 * run are failed on the way. A job found waiting waits until a worker is freed, so while
 * none was (or none is free now) and no device failed, only the jobs queued since need a
 * look: a submission or a kick costs O(1) however long the queue.
 */
static struct job *next_placed(struct sched *s, struct slot **to)
{
    struct sched_seen now = {job_registry_queued_gen(s->reg), s->freed, device_errors(s)};
    for (int i = 0; i < s->n_slots; i++)
        s->place_names[i] = worker_device(s->slots[i].worker);
    bool only_new = now.device_errors == s->walked.device_errors &&
                    (now.freed == s->walked.freed || !any_slot_free(s));
    struct job *j = only_new ? next_arrival(s, to) : next_in_queue(s, to);
    if (!j)
        s->walked = now;
    return j;
}

void sched_kick(struct sched *s)
{
    if (s->stopping)
        return;
    for (;;) {
        struct slot *sl = NULL;
        struct job *j = next_placed(s, &sl);
        if (!j)
            return;
        struct task *t = task_new(job_spec(j), s->data_roots, s->n_data_roots, j);
        if (t && plan_checkpoints(s, j, t)) {
            task_free(t);
            t = NULL;
        }
        if (!t) {
            job_finish(j, ERR_NOMEM, "out of memory starting the job", NULL);
            continue;
        }
        if (plan_init(s, j, t)) {
            task_free(t);
            continue;
        }
        t->emit = emit;
        t->emit_ctx = s;
        *sl = (struct slot){.worker = sl->worker, .task = t, .job = j};
        job_mark_running(j, worker_device(sl->worker));
        log_info("job %s started on %s", job_id(j), worker_device(sl->worker));
        worker_assign(sl->worker, t);
        notify(s, j);
    }
}

static void stop_task(struct slot *sl, enum train_stop why)
{
    /* A cancel wins over a pause or a shutdown asked for earlier. */
    if (sl->stop == TRAIN_RUN || why == TRAIN_STOP_CANCEL)
        sl->stop = why;
    atomic_store(&sl->task->stop, (int)sl->stop);
    atomic_store(&sl->task->abort_io, true);
}

int sched_cancel(struct sched *s, struct job *j)
{
    enum job_state st = job_state(j);
    struct slot *sl = slot_of_job(s, j);
    if (st == JOB_QUEUED || st == JOB_PAUSED || (st == JOB_RUNNING && !sl)) {
        job_finish(j, ERR_CANCELLED, NULL, NULL);
        notify(s, j);
        return 0;
    }
    if (st != JOB_RUNNING)
        return -1;
    stop_task(sl, TRAIN_STOP_CANCEL);
    return 0;
}

int sched_pause(struct sched *s, struct job *j)
{
    struct slot *sl = slot_of_job(s, j);
    if (job_state(j) == JOB_QUEUED) {
        job_pause(j, resume_point(j));
        notify(s, j);
        return 0;
    }
    if (job_state(j) != JOB_RUNNING || !sl)
        return -1;
    stop_task(sl, TRAIN_STOP_PAUSE);
    return 0;
}

int sched_resume(struct sched *s, struct job *j)
{
    if (job_resume(j))
        return -1;
    notify(s, j);
    sched_kick(s);
    return 0;
}

bool sched_gpu_state(const struct sched *s, const char *device, struct sched_gpu_state *out)
{
    for (int k = 0; k < s->n_slots; k++) {
        struct worker *w = s->slots[k].worker;
        if (strcmp(worker_device(w), device) != 0)
            continue;
        out->error = worker_device_error(w);
        out->has_memory = worker_device_memory(w, &out->allocated, &out->reserved);
        return true;
    }
    return false;
}

size_t sched_queue_depth(const struct sched *s)
{
    size_t n = 0;
    for (size_t i = 0; i < job_registry_count(s->reg); i++)
        n += job_state(job_registry_at(s->reg, i)) == JOB_QUEUED;
    return n;
}

/*
 * A job's folder keeps only its recorded checkpoint: a kill can come between a write and its
 * rename (a temp file), between the rename and the record (a file no record names), or between
 * the record and the removal of the one it replaced. Nothing else would ever remove those.
 */
static void sweep_checkpoints(struct sched *s, const struct job *j)
{
    if (!s->state_dir)
        return;
    char dir[4200];
    const char *keep = NULL;
    snprintf(dir, sizeof dir, "%s/checkpoints/%s", s->state_dir, job_id(j));
    job_latest_checkpoint(j, NULL, &keep);
    struct err e = {0};
    int removed = 0;
    if (snapshot_sweep(dir, keep, &removed, &e))
        log_warn("job %s: %s", job_id(j), e.msg);
    if (removed)
        log_info("job %s: removed %d checkpoint file%s no record names", job_id(j), removed,
                 removed == 1 ? "" : "s");
}

int sched_recover(struct sched *s)
{
    int n = 0;
    for (size_t i = 0; i < job_registry_count(s->reg); i++) {
        struct job *j = job_registry_at(s->reg, i);
        sweep_checkpoints(s, j);
        if (job_state(j) != JOB_RUNNING)
            continue;
        int64_t from = resume_point(j);
        job_requeue(j, from);
        log_warn("job %s was running when traind last stopped without a shutdown; it goes on "
                 "from iteration %lld", job_id(j), (long long)from);
        n++;
    }
    return n;
}

bool sched_check_heartbeats(struct sched *s)
{
    bool healthy = true;
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (worker_heartbeat_age_ms(sl->worker) <= s->heartbeat_timeout_ms) {
            if (sl->stuck && !sl->task) {   /* an idle worker that was slow to beat: fine again */
                sl->stuck = false;
                log_warn("worker %s answered again", worker_device(sl->worker));
            }
            continue;
        }
        healthy = false;
        if (sl->stuck)
            continue;
        sl->stuck = true;
        log_error("worker %s has not shown life for %lld s", worker_device(sl->worker),
                  (long long)(worker_heartbeat_age_ms(sl->worker) / 1000));
        if (sl->job) {
            struct job *j = sl->job;
            sl->job = NULL;   /* its task stays with the worker until DONE arrives */
            job_finish(j, ERR_INTERNAL, "worker stopped responding", NULL);
            notify(s, j);
        }
        if (sl->task) {   /* if it is stuck in a download, that ends it */
            atomic_store(&sl->task->stop, TRAIN_STOP_CANCEL);
            atomic_store(&sl->task->abort_io, true);
        }
    }
    return healthy;
}

int sched_start(uv_loop_t *loop, struct job_registry *reg, const struct sched_config *cfg,
                struct sched **out, struct err *e)
{
    struct sched *s = calloc(1, sizeof *s);
    int n = cfg->cpu_workers > 0 ? cfg->cpu_workers : 1;
    int gpus = cfg->devices ? cfg->devices->n_gpus : 0;
    if (!s || !(s->slots = calloc((size_t)(n + gpus), sizeof *s->slots)) ||
        !(s->place_names = calloc((size_t)(n + gpus), sizeof *s->place_names)) ||
        !(s->place_idle = calloc((size_t)(n + gpus), sizeof *s->place_idle))) {
        if (s) {
            free(s->slots);
            free(s->place_names);
        }
        free(s);
        return err_set(e, ERR_NOMEM, "scheduler: out of memory");
    }
    s->reg = reg;
    s->devices = cfg->devices;
    s->data_roots = cfg->data_roots;
    s->n_data_roots = cfg->n_data_roots;
    s->heartbeat_timeout_ms = cfg->heartbeat_timeout_ms > 0 ? cfg->heartbeat_timeout_ms
                                                            : SCHED_HEARTBEAT_TIMEOUT_MS;
    s->cache_dir = cfg->cache_dir && *cfg->cache_dir ? cfg->cache_dir : NULL;
    s->cache_limit = cfg->cache_limit;
    if (cfg->state_dir && !(s->state_dir = strdup(cfg->state_dir))) {
        free(s->slots);
        free(s->place_names);
        free(s->place_idle);
        free(s);
        return err_set(e, ERR_NOMEM, "scheduler: out of memory");
    }
    mpsc_init(&s->events);
    int rc = uv_async_init(loop, &s->doorbell, on_doorbell);
    if (rc) {
        free(s->slots);
        free(s->place_names);
        free(s->place_idle);
        free(s->state_dir);
        free(s);
        return err_set(e, ERR_INTERNAL, "uv_async_init: %s", uv_strerror(rc));
    }
    s->doorbell.data = s;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n + gpus; i++) {
        char name[16];
        const struct devices_gpu *g = i >= n ? &cfg->devices->gpus[i - n] : NULL;
        if (g && !g->used)
            continue;   /* --gpus leaves it alone: no worker, so no job, not even auto */
        if (g)
            snprintf(name, sizeof name, "cuda:%d", g->index);
        else
            snprintf(name, sizeof name, n == 1 ? "cpu" : "cpu:%d", i);
        if (worker_start(name, g ? g->index : -1, g ? g->pci_bus_id : NULL, cfg->gpu_backends,
                         &s->slots[s->n_slots].worker, e)) {
            sched_shutdown(s);
            /* The caller runs the loop to close the doorbell, then frees s. */
            *out = s;
            return e->code;
        }
        s->n_slots++;
    }
    for (int i = 0; i < s->n_slots; i++)   /* the GPUs made their contexts meanwhile, at once */
        worker_wait_ready(s->slots[i].worker, &t0);
    *out = s;
    return 0;
}

void sched_drain(struct sched *s, void (*done)(void *ctx), void *ctx)
{
    s->stopping = true;
    s->drained = done;
    s->drained_ctx = ctx;
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].task)
            stop_task(&s->slots[i], TRAIN_STOP_PREEMPT);
    check_drained(s);
}

bool sched_draining(const struct sched *s)
{
    return s->stopping;
}

void sched_shutdown(struct sched *s)
{
    if (!s || uv_is_closing((uv_handle_t *)&s->doorbell))
        return;
    s->stopping = true;
    s->drained = NULL;
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].task)
            stop_task(&s->slots[i], TRAIN_STOP_PREEMPT);
    for (int i = 0; i < s->n_slots; i++)
        worker_stop(s->slots[i].worker);
    /* Every worker has emitted its DONE by now; apply them so no job is left running. */
    drain_events(s, 0);
    uv_close((uv_handle_t *)&s->doorbell, NULL);
}

void sched_free(struct sched *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_slots; i++) {
        worker_free(s->slots[i].worker);
        task_free(s->slots[i].task);
    }
    free(s->slots);
    free(s->place_names);
    free(s->place_idle);
    free(s->state_dir);
    free(s);
}
