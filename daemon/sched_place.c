/* sched_place.c — which queued job starts next, on which idle workers (one a replica), and which can never run. */
#include "sched_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "placement.h"
#include "world.h"

/* Whether rank 0 (traind alone: traind) has a GPU worker: replica 0 runs there. */
static bool has_gpu_worker(const struct sched *s)
{
    for (int k = 0; k < s->n_slots; k++)
        if (worker_rank(s->slots[k].worker) == 0 && place_is_gpu(worker_device(s->slots[k].worker), NULL))
            return true;
    return false;
}

/*
 * May a replica of spec run on worker k? As place_allows, and the replicas of a job are of one
 * kind (their all-reduce is comm/'s on the host, or NCCL's on GPUs): "auto" takes GPUs where
 * rank 0 has them and NCCL can be loaded, else CPU workers. Another rank's GPU takes replicas
 * only where NCCL loads too (its hello says).
 */
static bool replica_allows(const struct sched *s, const struct job_spec *spec, int k)
{
    const char *name = worker_device(s->slots[k].worker);
    if (!place_allows(spec, name))
        return false;
    bool gpu = place_is_gpu(name, NULL);
    int rank = worker_rank(s->slots[k].worker);
    if (spec->replicas > 1 && gpu && rank != 0 && !world_rank_info(s->world, rank)->nccl)
        return false;
    if (spec->replicas <= 1 || spec->device != SPEC_DEVICE_AUTO)
        return true;
    struct err e = {0};
    return gpu == (has_gpu_worker(s) && comm_dev_available(&e));
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

int sched_replicas(const struct sched *s, const struct job *j, struct sched_replica *out, int cap)
{
    int n = 0, size = 0, straggler = -1;
    for (int k = 0; k < s->n_slots; k++) {
        const struct slot *sl = &s->slots[k];
        if (sl->job != j || !sl->group)
            continue;
        int r = sl->rank;
        if (r >= cap)
            continue;
        if (!n++) {
            double ratio;
            size = train_world_size(sl->group->world);
            straggler = train_world_straggler(sl->group->world, &ratio);
        }
        const struct world_rank *wr = world_rank_info(s->world, worker_rank(sl->worker));
        out[r] = (struct sched_replica){.rank = r, .device = worker_device(sl->worker),
                                        .host = s->world && wr ? wr->host : NULL, .straggler = r == straggler};
        train_world_stats(sl->group->world, r, &out[r].st);
    }
    /* All of them, or none: a job whose rank 0 has ended (paused, say) waits for the others' ends. */
    return n == size && n <= cap ? n : 0;
}

/*
 * The replicas a job runs as: its spec's, or, when fewer of the workers it may use answer
 * (not stuck, their device fine), that many; the arithmetic does not depend on how many
 * (replica.h), so a job stored before --cpu-workers was lowered, or one that lost a worker,
 * goes on rather than waits for ever.
 */
static int replicas_now(const struct sched *s, const struct job_spec *spec)
{
    int n = 0;
    for (int k = 0; k < s->n_slots && spec->replicas > 1; k++)
        n += replica_allows(s, spec, k) && !s->slots[k].stuck &&
             !worker_device_error(s->slots[k].worker);
    return n > 0 && n < spec->replicas ? n : spec->replicas;
}

bool sched_replicas_refused(const struct sched *s, const struct job_spec *spec, char *why, size_t cap)
{
    if (spec->replicas <= 1)
        return false;   /* one replica is placed, or refused, as any job */
    int n = 0;
    bool gpus = false, on_rank0 = false;
    for (int k = 0; k < s->n_slots; k++)
        if (replica_allows(s, spec, k)) {
            n++;
            gpus = place_is_gpu(worker_device(s->slots[k].worker), NULL);
            on_rank0 = on_rank0 || worker_rank(s->slots[k].worker) == 0;
        }
    struct err e = {0};
    if (gpus && !comm_dev_available(&e)) {
        snprintf(why, cap, "%s", e.msg);
        return true;
    }
    if (n && !on_rank0) {   /* replica 0 runs on rank 0, which has none of them */
        snprintf(why, cap, "replica 0 runs on rank 0, which has none of the %s the job may use", gpus ? "GPUs" : "workers");
        return true;
    }
    if (spec->replicas <= n)
        return false;
    bool world = world_size(s->world) > 1;
    snprintf(why, cap, "%d replicas, but %s %d %s%s the job may use (%s%s)", spec->replicas,
             world ? "the world has" : "this traind has", n, gpus ? "GPU" : "worker", n == 1 ? "" : "s",
             gpus ? "--gpus" : "--cpu-workers", world && gpus ? ", and NCCL on each rank" : "");
    return true;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/*
 * The idle workers j may run on, one a replica (PLACE_OK, w[0 .. *n)), or why it waits or
 * never runs.
 */
static enum place_result place(struct sched *s, struct job *j, size_t *w, int *n, char *why, size_t cap)
{
    const struct job_spec *spec = job_spec(j);
    *n = replicas_now(s, spec);
    /* A GPU whose backend failed takes only jobs that name it (they fail, saying why). */
    for (int k = 0; k < s->n_slots; k++)
        s->place_idle[k] = !s->slots[k].task && (spec->device == SPEC_DEVICE_CUDA ||
                                                 !worker_device_error(s->slots[k].worker)) &&
                           replica_allows(s, spec, k);
    /* A job of one replica runs on rank 0: the other ranks' workers (after its own) are not its to wait for. */
    size_t seen = (size_t)s->n_slots;
    while (*n <= 1 && seen > 0 && worker_rank(s->slots[seen - 1].worker) != 0)
        seen--;
    enum place_result pr = PLACE_OK;
    for (int r = 0; r < *n && pr == PLACE_OK; r++)
        if ((pr = place_job(spec, s->place_names, s->place_idle, seen, &w[r], why, cap)) == PLACE_OK)
            s->place_idle[w[r]] = false;
    if (pr == PLACE_WAIT && spec->device == SPEC_DEVICE_LIST)
        pr = unless_all_failed(s, spec, why, cap);
    /* A list's GPUs are taken in list order, which may mix ranks: slot order keeps them contiguous. */
    if (pr == PLACE_OK && *n > 1 && spec->device == SPEC_DEVICE_LIST && world_size(s->world) > 1)
        qsort(w, (size_t)*n, sizeof *w, cmp_size);
    /* Replica 0 writes the job's metrics and checkpoints: it waits for a worker of rank 0's. */
    if (pr == PLACE_OK && worker_rank(s->slots[w[0]].worker) != 0)
        pr = PLACE_WAIT;
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
    sched_notify(s, j);
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
static struct job *next_arrival(struct sched *s, size_t *to, int *n)
{
    uint64_t since = s->walked.queued_gen;
    struct job *best = NULL;
    for (struct job *j = job_registry_queued_since(s->reg, since), *next; j; j = next) {
        next = job_registry_queued_since_next(s->reg, j, since);
        size_t w[SPEC_MAX_REPLICAS];
        char why[256];
        int placed;
        enum place_result pr = place(s, j, w, &placed, why, sizeof why);
        if (pr == PLACE_NO_DEVICE)
            fail_unplaceable(s, j, why, sizeof why);
        else if (pr == PLACE_OK && (!best || job_runs_before(j, best))) {
            best = j;
            *n = placed;
            memcpy(to, w, (size_t)placed * sizeof *w);
        }
    }
    return best;
}

/* Every queued job in run order: the first that can start; those none can run fail. */
static struct job *next_in_queue(struct sched *s, size_t *to, int *n)
{
    for (struct job *j = job_registry_next_queued(s->reg), *next; j; j = next) {
        next = job_registry_queued_after(s->reg, j);
        char why[256];
        enum place_result pr = place(s, j, to, n, why, sizeof why);
        if (pr == PLACE_OK)
            return j;
        if (pr == PLACE_NO_DEVICE)
            fail_unplaceable(s, j, why, sizeof why);
    }
    return NULL;
}

/*
 * The queued job to start now and its workers' slots (to[r] for replica r): the first, in the
 * registry's queue order (highest priority, then oldest), that idle workers may run. Jobs no
 * worker will ever run are failed on the way. A job found waiting waits until a worker is freed, so while
 * none was (or none is free now) and no device failed, only the jobs queued since need a
 * look: a submission or a kick costs O(1) however long the queue.
 */
struct job *sched_next_placed(struct sched *s, size_t *to, int *n)
{
    struct sched_seen now = {job_registry_queued_gen(s->reg), s->freed, device_errors(s)};
    for (int i = 0; i < s->n_slots; i++)
        s->place_names[i] = worker_device(s->slots[i].worker);
    bool only_new = now.device_errors == s->walked.device_errors &&
                    (now.freed == s->walked.freed || !any_slot_free(s));
    struct job *j = only_new ? next_arrival(s, to, n) : next_in_queue(s, to, n);
    if (!j)
        s->walked = now;
    return j;
}
