/* scheduler.c — dispatch of queued jobs to workers (sched_*) and the doorbell through which workers report back. */
#include "scheduler.h"
#include "sched_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "init_job.h"
#include "log.h"
#include "replica.h"
#include "snapshot.h"
#include "world.h"

#define SCHED_EVENTS_PER_TURN 512

void sched_set_listener(struct sched *s, sched_listener_fn fn, void *ctx)
{
    s->listener = fn;
    s->listener_ctx = ctx;
}

void sched_notify(struct sched *s, struct job *j)
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

/* The slot of j's task, or of its replicas' rank 0, which alone sees stop requests. */
static struct slot *slot_of_job(struct sched *s, const struct job *j)
{
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job == j && s->slots[i].rank == 0)
            return &s->slots[i];
    return NULL;
}

/* A replica's task is done: the world goes with the last. */
static void group_leave(struct sched *s, struct replica_group *g)
{
    if (g && --g->left == 0) {
        world_run_end(s->world, g->world);
        train_world_free(g->world);
        free(g);
    }
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

/*
 * j's run as replicas ended because one of them was lost (silent at an all-reduce, or to
 * the heartbeat check): j goes back to the queue, to go on from its latest checkpoint on the
 * workers that answer (replicas_now), or to paused or cancelled if we were stopping it for
 * that; its slots let go of it (their tasks' ends follow). A worker whose replica was lost
 * takes no job until its task ends.
 */
static void requeue_lost(struct sched *s, struct job *j, struct replica_group *g, int lost, const char *why)
{
    enum train_stop stop = TRAIN_RUN;
    for (int k = 0; k < s->n_slots; k++) {
        struct slot *o = &s->slots[k];
        if (o->job != j)
            continue;
        stop = o->rank == 0 ? o->stop : stop;
        o->job = NULL;
        if (o->group == g && o->rank == lost && o->task)
            o->stuck = true;
    }
    int64_t from = resume_point(j);
    if (stop == TRAIN_STOP_CANCEL)
        job_finish(j, ERR_CANCELLED, NULL, NULL);
    else if (stop == TRAIN_STOP_PAUSE)
        job_pause(j, from);
    else
        job_requeue(j, from);
    char who[48] = "a replica on another rank";   /* lost < 0: its all-reduce across ranks timed out or lost a process */
    if (lost >= 0)
        snprintf(who, sizeof who, "replica %d", lost);
    log_warn("job %s lost %s (%s); %s %lld", job_id(j), who, why,
             stop == TRAIN_STOP_CANCEL ? "it was being cancelled, at iteration"
             : stop == TRAIN_STOP_PAUSE ? "it is paused, to go on from iteration"
                                        : "it goes back to the queue and on from iteration", (long long)from);
    sched_notify(s, j);
}

/* A replica's end, its world lost to an all-reduce timeout: requeue_lost. */
static void replica_lost(struct sched *s, struct slot *sl, struct job *j, const struct err *e)
{
    requeue_lost(s, j, sl->group, train_world_lost(sl->group->world), e->msg);
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
        if (j && !job_is_terminal(job_state(j)))
            job_set_data_bytes(j, ev->bytes_fetched, ev->bytes_total);
        if (j && job_append_metrics(j, &ev->row, &e))
            log_warn("%s", e.msg);
        task_event_free(ev);
        if (j)
            sched_notify(s, j);
        return;
    }
    if (sl->stuck)
        log_warn("worker %s answered again; it takes jobs again", worker_device(sl->worker));
    if (j && sl->group && train_world_lost(sl->group->world) >= 0 &&
        (sl->rank == 0 || train_world_lost(sl->group->world) == 0)) {
        replica_lost(s, sl, j, &ev->err);
        j = NULL;   /* requeued, its replicas' slots let go of it */
    } else if (j && sl->rank == 0 && ev->err.code && sl->group && train_world_timed_out(sl->group->world)) {
        requeue_lost(s, j, sl->group, -1, ev->err.msg);   /* a rank of another process hung or died */
        j = NULL;
    }
    if (j && sl->rank == 0) {   /* the other replicas' ends say nothing rank 0's does not */
        finish_job(s, j, sl->stop, ev, ev->params);
        ev->params = NULL;
    }
    group_leave(s, sl->group);
    task_free(sl->task);
    *sl = (struct slot){.worker = sl->worker};
    s->freed++;
    task_event_free(ev);
    if (j)
        sched_notify(s, j);
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
    t->list_limits = s->list_limits;
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
    sched_notify(s, j);
    return -1;
}

/* One task of j's, rank of n; NULL when it failed j (out of memory, or init.from gone). */
static struct task *task_of(struct sched *s, struct job *j, struct replica_group *g, int rank)
{
    struct task *t = task_new(job_spec(j), s->data_roots, s->n_data_roots, j);
    if (t && plan_checkpoints(s, j, t)) {
        task_free(t);
        t = NULL;
    }
    if (!t) {
        job_finish(j, ERR_NOMEM, "out of memory starting the job", NULL);
        return NULL;
    }
    if (plan_init(s, j, t)) {
        task_free(t);
        return NULL;
    }
    t->emit = emit;
    t->emit_ctx = s;
    t->world = g ? g->world : NULL;
    t->rank = rank;
    return t;
}

/* The world of j's n replicas on the workers of slots w: in this process, or spanning ranks. */
static int world_of(struct sched *s, const size_t *w, int n, struct train_world **out, struct err *e)
{
    struct worker *workers[SPEC_MAX_REPLICAS];
    bool spans = false;
    for (int r = 0; r < n; r++) {
        workers[r] = s->slots[w[r]].worker;
        spans = spans || worker_rank(workers[r]) != 0;
    }
    return spans ? world_replicas(s->world, workers, n, s->allreduce_timeout_s, out, e)
                 : train_world_new(n, out, e);
}

/* j's tasks, one a replica, sharing a world when there are several; -1 when j failed. */
static int tasks_of(struct sched *s, struct job *j, const size_t *w, int n, struct task **t,
                    struct replica_group **g)
{
    struct err e = {0};
    *g = NULL;
    if (n > 1 && (!(*g = calloc(1, sizeof **g)) || world_of(s, w, n, &(*g)->world, &e))) {
        free(*g);
        job_finish(j, e.code && e.code != ERR_NOMEM ? e.code : ERR_NOMEM,
                   e.code && e.code != ERR_NOMEM ? e.msg : "out of memory starting the job's replicas", NULL);
        return -1;
    }
    if (*g)
        train_world_set_timeout((*g)->world, s->allreduce_timeout_s);
    for (int r = 0; r < n; r++) {
        if (!(t[r] = task_of(s, j, *g, r))) {
            while (r-- > 0)
                task_free(t[r]);
            if (*g) {
                world_run_end(s->world, (*g)->world);
                train_world_free((*g)->world);
            }
            free(*g);
            return -1;
        }
    }
    if (*g)
        (*g)->left = n;
    return 0;
}

void sched_kick(struct sched *s)
{
    if (s->stopping)
        return;
    for (;;) {
        size_t w[SPEC_MAX_REPLICAS];
        int n = 1;
        struct job *j = sched_next_placed(s, w, &n);
        if (!j)
            return;
        struct task *t[SPEC_MAX_REPLICAS];
        struct replica_group *g;
        if (tasks_of(s, j, w, n, t, &g)) {
            sched_notify(s, j);
            continue;
        }
        for (int r = 0; r < n; r++) {
            struct slot *sl = &s->slots[w[r]];
            *sl = (struct slot){.worker = sl->worker, .task = t[r], .job = j, .rank = r, .group = g};
        }
        const char *where = worker_device(s->slots[w[0]].worker);
        job_mark_running(j, where);
        if (n < job_spec(j)->replicas)
            log_warn("job %s runs as %d replica%s of the %d it asks: only %d worker%s it may use answer%s",
                     job_id(j), n, n == 1 ? "" : "s", job_spec(j)->replicas, n, n == 1 ? "" : "s",
                     n == 1 ? "s" : "");
        if (n > 1)
            log_info("job %s started on %s and %d more worker%s as %d replicas", job_id(j), where, n - 1,
                     n == 2 ? "" : "s", n);
        else
            log_info("job %s started on %s", job_id(j), where);
        for (int r = 0; r < n; r++)
            worker_assign(s->slots[w[r]].worker, t[r]);
        sched_notify(s, j);
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
        sched_notify(s, j);
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
        sched_notify(s, j);
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
    sched_notify(s, j);
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

int sched_worker_count(const struct sched *s)
{
    return s->n_slots;
}

const char *sched_worker_at(const struct sched *s, int k, int *rank, const struct job **job)
{
    *rank = worker_rank(s->slots[k].worker);
    *job = s->slots[k].task ? s->slots[k].job : NULL;
    return worker_device(s->slots[k].worker);
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

/* Notes in their jobs the stragglers among running replicas (rank 0's slot speaks for a job). */
static void check_stragglers(struct sched *s)
{
    char host[256] = "";
    for (int i = 0; i < s->n_slots; i++) {
        const struct slot *sl = &s->slots[i];
        double ratio;
        int r = sl->job && sl->group && sl->rank == 0 ? train_world_straggler(sl->group->world, &ratio) : -1;
        for (int k = 0; r >= 0 && k < s->n_slots; k++) {
            const struct slot *o = &s->slots[k];
            if (o->job != sl->job || o->group != sl->group || o->rank != r)
                continue;
            if (!host[0] && gethostname(host, sizeof host) != 0)
                snprintf(host, sizeof host, "localhost");
            host[sizeof host - 1] = '\0';
            if (job_warn_straggler(sl->job, r, host, worker_device(o->worker), ratio))
                sched_notify(s, sl->job);
        }
    }
}

bool sched_check_heartbeats(struct sched *s)
{
    bool healthy = true;
    check_stragglers(s);
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->group && !train_world_ended(sl->group->world) && train_world_waiting(sl->group->world, sl->rank))
            continue;   /* waiting for a peer, which the check finds if it is the silent one */
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
        if (sl->job && sl->group) {
            requeue_lost(s, sl->job, sl->group, sl->rank, "its worker stopped responding");
        } else if (sl->job) {   /* its task stays until DONE arrives */
            struct job *j = sl->job;
            sl->job = NULL;
            job_finish(j, ERR_INTERNAL, "worker stopped responding", NULL);
            sched_notify(s, j);
        }
        if (sl->task) {   /* if it is stuck in a download, that ends it */
            atomic_store(&sl->task->stop, TRAIN_STOP_CANCEL);
            atomic_store(&sl->task->abort_io, true);
        }
        if (sl->group) {   /* its peers may wait for it in an all-reduce: release them */
            struct err gone = {0};
            err_set(&gone, ERR_INTERNAL, "worker %s stopped responding", worker_device(sl->worker));
            replica_leave(sl->group->world, sl->rank, &gone);
        }
    }
    return healthy;
}

/*
 * The other ranks' workers, after this process's own: placement takes idle workers in slot
 * order, so a job's replica 0 lands here when it can and each rank's replicas are contiguous.
 * A rank's are its CPU workers, then its GPUs that it uses (world.h numbers them so).
 */
static int add_remote_workers(struct sched *s, struct err *e)
{
    int more = 0;
    for (int r = 1; r < world_size(s->world); r++)
        more += world_rank_info(s->world, r)->cpu_workers +
                (int)json_array_size(world_rank_info(s->world, r)->gpus);
    if (!more)
        return 0;
    struct slot *slots = realloc(s->slots, (size_t)(s->n_slots + more) * sizeof *slots);
    if (slots)
        s->slots = slots;
    const char **names = slots ? realloc(s->place_names, (size_t)(s->n_slots + more) * sizeof *names) : NULL;
    if (names)
        s->place_names = names;
    bool *idle = names ? realloc(s->place_idle, (size_t)(s->n_slots + more) * sizeof *idle) : NULL;
    if (!idle)
        return err_set(e, ERR_NOMEM, "scheduler: out of memory");
    s->place_idle = idle;
    struct worker_remote via = world_remote(s->world);
    for (int r = 1; r < world_size(s->world); r++) {
        const struct world_rank *wr = world_rank_info(s->world, r);
        int index = 0;
        for (size_t i = 0; i < (size_t)wr->cpu_workers + json_array_size(wr->gpus); i++) {
            json_t *g = i >= (size_t)wr->cpu_workers ? json_array_get(wr->gpus, i - (size_t)wr->cpu_workers) : NULL;
            if (g && !json_is_true(json_object_get(g, "used")))
                continue;
            char name[48];
            if (g)
                snprintf(name, sizeof name, "%s", json_string_value(json_object_get(g, "device")));
            else
                snprintf(name, sizeof name, "rank%d/cpu:%zu", r, i);
            s->slots[s->n_slots] = (struct slot){0};
            if (worker_start_remote(name, r, index++, &via, &s->slots[s->n_slots].worker, e))
                return e->code;
            s->n_slots++;
        }
    }
    return 0;
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
    s->world = cfg->world;
    s->data_roots = cfg->data_roots;
    s->n_data_roots = cfg->n_data_roots;
    s->heartbeat_timeout_ms = cfg->heartbeat_timeout_ms > 0 ? cfg->heartbeat_timeout_ms
                                                            : SCHED_HEARTBEAT_TIMEOUT_MS;
    s->allreduce_timeout_s = cfg->allreduce_timeout_s > 0 ? cfg->allreduce_timeout_s : SCHED_ALLREDUCE_TIMEOUT_S;
    s->cache_dir = cfg->cache_dir && *cfg->cache_dir ? cfg->cache_dir : NULL;
    s->cache_limit = cfg->cache_limit;
    s->list_limits = cfg->list_limits;
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
    return add_remote_workers(s, e);
}

void sched_drain(struct sched *s, void (*done)(void *ctx), void *ctx)
{
    s->stopping = true;
    s->drained = done;
    s->drained_ctx = ctx;
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].task && s->slots[i].rank == 0)   /* rank 0 stops its replicas */
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
        if (s->slots[i].task && s->slots[i].rank == 0)   /* rank 0 stops its replicas */
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
        if (s->slots[i].task)
            group_leave(s, s->slots[i].group);
        task_free(s->slots[i].task);
    }
    free(s->slots);
    free(s->place_names);
    free(s->place_idle);
    free(s->state_dir);
    free(s);
}
