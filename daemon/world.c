/* world.c — rank 0 of a world under mpirun: the followers' hellos, their replicas' runs sent out, their reports back. */
#include "world.h"
#include "world_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "log.h"
#include "placement.h"
#include "replica.h"
#include "spec.h"
#include "task.h"

/* One job's replicas across ranks, from world_replicas until the scheduler frees its world. */
struct run {
    struct run *next;
    int tag;
    struct train_world *tw;       /* rank 0's part: how assign finds the run */
    int total;                    /* replicas */
    int *rank_of;                 /* by replica: its MPI rank */
    int *procs, n_procs;          /* the ranks taking part, in replica order */
    bool *sent;                   /* by proc: its first run message (with the files) is out */
    struct task **tasks;          /* by replica: a follower's task not reported done yet */
    bool gpus;                    /* its replicas are GPUs: nccl_id joins their communicator */
    unsigned char nccl_id[COMM_DEV_ID_BYTES];
};

struct world {
    struct comm_mpi *mpi;
    int size;
    struct world_rank *ranks;     /* by rank */
    int64_t timeout_ms;
    pthread_t thread;
    bool started;
    atomic_bool quiet;
    pthread_mutex_t mu;           /* guards runs (the loop thread and the report thread) */
    struct run *runs;
    int next_tag;
};

int world_send_json(struct comm_mpi *mpi, int to, json_t *o, struct err *e)
{
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return err_set(e, ERR_NOMEM, "world: out of memory for a message to rank %d", to);
    int rc = comm_mpi_send(mpi, to, text, strlen(text), WORLD_SEND_MS, e);
    free(text);
    return rc;
}

json_t *world_recv_json(struct comm_mpi *mpi, int64_t wait_ms, int *from, const char **kind, json_t **body,
                        struct err *e)
{
    char *buf;
    size_t len;
    if (comm_mpi_recv(mpi, from, &buf, &len, wait_ms, e) || !buf)
        return NULL;
    json_error_t je;
    json_t *o = json_loadb(buf, len, 0, &je);
    free(buf);
    void *it = o && json_is_object(o) ? json_object_iter(o) : NULL;
    if (!it) {
        json_decref(o);
        err_set(e, ERR_INTERNAL, "world: a message from rank %d is not a JSON object", *from);
        return NULL;
    }
    *kind = json_object_iter_key(it);
    *body = json_object_iter_value(it);
    return o;
}

int world_read_fd(int fd, char **out, size_t *len, struct err *e)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b)
            return err_set(e, ERR_NOMEM, "world: out of memory reading a checkpoint");
        ssize_t got = pread(fd, b + n, cap - n, (off_t)n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            free(b);
            return err_set(e, ERR_IO, "world: reading a checkpoint: %s", strerror(errno));
        }
        if (got == 0)
            break;
        n += (size_t)got;
        if (n == cap) {
            char *p = realloc(b, cap *= 2);
            if (!p)
                free(b);
            b = p;
        }
    }
    *out = b;
    *len = n;
    return 0;
}

/* A hello's GPUs, named as rank 0's scheduler names their workers (rankR/cuda:K); NULL if malformed. */
static json_t *gpus_of(int rank, json_t *list)
{
    json_t *out = json_is_array(list) ? json_deep_copy(list) : NULL;
    for (size_t i = 0; out && i < json_array_size(out); i++) {
        json_t *g = json_array_get(out, i);
        const char *dev = json_string_value(json_object_get(g, "device"));
        char name[48];
        if (!dev || !place_is_gpu(dev, NULL) || !json_is_boolean(json_object_get(g, "used"))) {
            json_decref(out);
            return NULL;
        }
        snprintf(name, sizeof name, "rank%d/%s", rank, dev);
        json_object_set_new(g, "device", json_string(name));
    }
    return out;
}

static int hello_from_all(struct world *w, struct err *e)
{
    for (int got = 1; got < w->size; got++) {
        int from = -1;
        const char *kind = NULL;
        json_t *body = NULL;
        json_t *o = world_recv_json(w->mpi, w->timeout_ms, &from, &kind, &body, e);
        if (!o && !e->code)
            return err_set(e, ERR_INTERNAL, "world: %d of %d ranks said hello within %lld s", got,
                           w->size, (long long)(w->timeout_ms / 1000));
        if (!o)
            return e->code;
        const char *host = json_string_value(json_object_get(body, "host"));
        json_int_t cpus = json_integer_value(json_object_get(body, "cpu_workers"));
        json_t *gpus = strcmp(kind, "hello") == 0 ? gpus_of(from, json_object_get(body, "gpus")) : NULL;
        if (strcmp(kind, "hello") != 0 || from <= 0 || from >= w->size || !host || cpus < 1 || cpus > 4096 ||
            !gpus || w->ranks[from].gpus) {
            json_decref(gpus);
            json_decref(o);
            return err_set(e, ERR_INTERNAL, "world: rank %d's first message is not a hello", from);
        }
        struct world_rank *r = &w->ranks[from];
        r->rank = from;
        snprintf(r->host, sizeof r->host, "%s", host);
        r->cpu_workers = (int)cpus;
        r->gpus = gpus;
        r->nccl = json_is_true(json_object_get(body, "nccl"));
        json_decref(o);
        log_info("rank %d on %s: %d CPU worker%s, %zu GPU%s%s", from, r->host, r->cpu_workers, cpus == 1 ? "" : "s",
                 json_array_size(gpus), json_array_size(gpus) == 1 ? "" : "s",
                 json_array_size(gpus) && !r->nccl ? " (no NCCL there: they take no replicas)" : "");
    }
    return 0;
}

/* A follower's replica is done: its task's DONE goes to the scheduler as a local one's would. */
static void on_done(struct world *w, int from, json_t *body)
{
    int tag = (int)json_integer_value(json_object_get(body, "tag"));
    int r = (int)json_integer_value(json_object_get(body, "rank"));
    struct task *t = NULL;
    pthread_mutex_lock(&w->mu);
    for (struct run *run = w->runs; run; run = run->next)
        if (run->tag == tag && r >= 0 && r < run->total && run->rank_of[r] == from) {
            t = run->tasks[r];
            run->tasks[r] = NULL;
        }
    pthread_mutex_unlock(&w->mu);
    if (!t) {
        log_warn("world: rank %d reported replica %d of a run (%d) this rank does not know", from, r, tag);
        return;
    }
    struct task_event *done = t->done;
    t->done = NULL;
    done->err.code = (int)json_integer_value(json_object_get(body, "code"));
    const char *msg = json_string_value(json_object_get(body, "message"));
    snprintf(done->err.msg, sizeof done->err.msg, "%s", msg ? msg : "");
    if (done->err.code != ERR_OK && done->err.code != ERR_CANCELLED)
        log_warn("rank %d, replica %d: %s", from, r, done->err.msg);
    t->emit(t->emit_ctx, done);
}

/* A follower's figures of its replicas (world_follow.c's report_stats), for GET /jobs/{id}/replicas. */
static void on_stats(struct world *w, int from, json_t *body)
{
    int tag = (int)json_integer_value(json_object_get(body, "tag"));
    json_t *list = json_object_get(body, "replicas");
    pthread_mutex_lock(&w->mu);   /* world_run_end takes it before the world is freed */
    struct run *run = w->runs;
    while (run && run->tag != tag)
        run = run->next;
    for (size_t i = 0; run && i < json_array_size(list); i++) {
        json_t *o = json_array_get(list, i);
        int r = (int)json_integer_value(json_object_get(o, "rank"));
        struct replica_stats st = {
            .iterations = json_integer_value(json_object_get(o, "iterations")),
            .step_last = json_number_value(json_object_get(o, "step_last")),
            .step_max = json_number_value(json_object_get(o, "step_max")),
            .step_median = json_number_value(json_object_get(o, "step_median")),
            .data_wait_s = json_number_value(json_object_get(o, "data_wait_s")),
            .reduce_s = json_number_value(json_object_get(o, "reduce_s")),
            .buckets = (int)json_integer_value(json_object_get(o, "buckets")),
            .reduce_hidden_s = json_number_value(json_object_get(o, "reduce_hidden_s")),
        };
        if (r >= 0 && r < run->total && run->rank_of[r] == from)
            train_world_report(run->tw, r, &st);
    }
    pthread_mutex_unlock(&w->mu);
}

static void *reports_main(void *arg)
{
    struct world *w = arg;
    while (!atomic_load(&w->quiet)) {
        int from = -1;
        const char *kind = NULL;
        json_t *body = NULL;
        struct err e = {0};
        json_t *o = world_recv_json(w->mpi, 100, &from, &kind, &body, &e);
        if (!o && e.code)
            log_warn("%s", e.msg);
        if (!o)
            continue;
        if (strcmp(kind, "done") == 0)
            on_done(w, from, body);
        else if (strcmp(kind, "stats") == 0)
            on_stats(w, from, body);
        else
            log_warn("world: rank %d sent '%s', which rank 0 does not take", from, kind);
        json_decref(o);
    }
    return NULL;
}

int world_lead(struct comm_mpi *mpi, int cpu_workers, int64_t timeout_ms, struct world **out, struct err *e)
{
    *out = NULL;
    struct world *w = calloc(1, sizeof *w);
    int size = comm_mpi_size(mpi);
    if (!w || !(w->ranks = calloc((size_t)size, sizeof *w->ranks))) {
        free(w);
        return err_set(e, ERR_NOMEM, "world: out of memory");
    }
    w->mpi = mpi;
    w->size = size;
    w->timeout_ms = timeout_ms;
    w->next_tag = 1;
    atomic_init(&w->quiet, false);
    pthread_mutex_init(&w->mu, NULL);
    w->ranks[0].cpu_workers = cpu_workers;
    if (gethostname(w->ranks[0].host, sizeof w->ranks[0].host - 1) != 0)
        snprintf(w->ranks[0].host, sizeof w->ranks[0].host, "localhost");
    *out = w;
    if (size == 1)
        return 0;
    if (hello_from_all(w, e))
        return e->code;
    int rc = pthread_create(&w->thread, NULL, reports_main, w);
    if (rc)
        return err_set(e, ERR_INTERNAL, "world: pthread_create: %s", strerror(rc));
    w->started = true;
    return 0;
}

int world_size(const struct world *w)
{
    return w ? w->size : 1;
}

const struct world_rank *world_rank_info(const struct world *w, int rank)
{
    return w && rank >= 0 && rank < w->size ? &w->ranks[rank] : NULL;
}

/* A rank's GPUs as its hello gave them: what they are, not what rank 0's caching allocator or jobs say. */
static json_t *rank_gpus(json_t *gpus)
{
    json_t *out = gpus ? json_deep_copy(gpus) : json_array();
    for (size_t i = 0; i < json_array_size(out); i++) {
        json_t *g = json_array_get(out, i);
        json_object_del(g, "memory_allocated");
        json_object_del(g, "memory_reserved");
        json_object_del(g, "job");
        json_object_del(g, "error");
    }
    return out;
}

json_t *world_ranks_json(const struct world *w, json_t *own_gpus)
{
    json_t *a = json_array();
    struct err e = {0};
    for (int r = 0; a && w && r < w->size; r++) {
        json_t *gpus = r ? w->ranks[r].gpus : own_gpus;
        json_array_append_new(a, json_pack("{s:i, s:s, s:i, s:o, s:b}", "rank", r, "host", w->ranks[r].host,
                                           "cpu_workers", w->ranks[r].cpu_workers,
                                           "gpus", rank_gpus(gpus),
                                           "nccl", r ? w->ranks[r].nccl : json_array_size(own_gpus) && comm_dev_available(&e)));
    }
    return a;
}

static void run_free(struct run *run)
{
    if (!run)
        return;
    free(run->rank_of);
    free(run->procs);
    free(run->sent);
    free(run->tasks);
    free(run);
}

/* The processes of a placement, in replica order; -1 unless replica 0 is here and each rank's are contiguous. */
static int procs_of(struct run *run, struct worker *const *workers, int n)
{
    run->n_procs = 0;
    for (int r = 0; r < n; r++) {
        int rank = worker_rank(workers[r]);
        run->rank_of[r] = rank;
        if (r > 0 && rank == run->rank_of[r - 1])
            continue;
        for (int p = 0; p < run->n_procs; p++)
            if (run->procs[p] == rank)
                return -1;
        run->procs[run->n_procs++] = rank;
    }
    return run->procs[0] == 0 ? 0 : -1;
}

int world_replicas(struct world *w, struct worker *const *workers, int n, double allreduce_timeout_s,
                   struct train_world **out, struct err *e)
{
    *out = NULL;
    struct run *run = calloc(1, sizeof *run);
    if (!run || !(run->rank_of = calloc((size_t)n, sizeof *run->rank_of)) ||
        !(run->procs = calloc((size_t)n, sizeof *run->procs)) ||
        !(run->sent = calloc((size_t)n, sizeof *run->sent)) ||
        !(run->tasks = calloc((size_t)n, sizeof *run->tasks))) {
        run_free(run);
        return err_set(e, ERR_NOMEM, "out of memory starting the job's replicas");
    }
    if (procs_of(run, workers, n)) {
        run_free(run);
        return err_set(e, ERR_INTERNAL, "replicas placed with replica 0 off rank 0, or a rank's not in one run");
    }
    int local = 0;
    while (local < n && run->rank_of[local] == 0)
        local++;
    run->total = n;
    pthread_mutex_lock(&w->mu);
    run->tag = w->next_tag;
    w->next_tag = w->next_tag >= comm_mpi_max_tag(w->mpi) ? 1 : w->next_tag + 1;
    pthread_mutex_unlock(&w->mu);
    struct comm_span *span = NULL;
    /* GPU replicas: rank 0 (replica 0 is here, on a GPU, so NCCL loads) makes the job's NCCL id. */
    run->gpus = place_is_gpu(worker_device(workers[0]), NULL);
    if (comm_span_new(w->mpi, run->procs, run->n_procs, 0, run->tag, world_span_ms(allreduce_timeout_s), &span, e) ||
        train_world_new_span(local, 0, n, span, out, e) ||
        (run->gpus && (comm_dev_make_id(run->nccl_id, e) || train_world_span_gpus(*out, run->nccl_id, e)))) {
        train_world_free(*out);
        *out = NULL;
        run_free(run);
        return e->code;
    }
    run->tw = *out;
    pthread_mutex_lock(&w->mu);
    run->next = w->runs;
    w->runs = run;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

void world_run_end(struct world *w, const struct train_world *tw)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    struct run **p = &w->runs;
    while (*p && (*p)->tw != tw)
        p = &(*p)->next;
    struct run *run = *p;
    if (run)
        *p = run->next;
    pthread_mutex_unlock(&w->mu);
    run_free(run);
}

/* A checkpoint file's bytes as a message of their own (after the run message that names it). */
static int send_file(struct world *w, int to, const char *path, int fd, struct err *e)
{
    int own = -1;
    if (path && (own = fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return err_set(e, ERR_IO, "%s: %s", path, strerror(errno));
    char *b = NULL;
    size_t len = 0;
    int rc = world_read_fd(fd, &b, &len, e);
    if (own >= 0)
        close(own);
    if (!rc)
        rc = comm_mpi_send(w->mpi, to, b, len, WORLD_SEND_MS, e);
    free(b);
    return rc;
}

static json_t *run_message(const struct run *run, int proc, const struct task *t, int index, bool files)
{
    int offset = 0, local = 0;
    while (run->rank_of[offset] != run->procs[proc])
        offset++;
    while (offset + local < run->total && run->rank_of[offset + local] == run->procs[proc])
        local++;
    json_t *procs = json_array();
    for (int p = 0; p < run->n_procs; p++)
        json_array_append_new(procs, json_integer(run->procs[p]));
    json_t *m = json_pack("{s:{s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:i, s:s, s:o, s:b, s:b}}", "run",
                          "tag", run->tag, "rank", t->rank, "index", index, "total", run->total,
                          "offset", offset, "local", local, "procs", procs, "me", proc, "job_id", t->job_id,
                          "spec", spec_to_json(t->spec), "resume", files && t->resume_from,
                          "init", files && t->init_fd >= 0);
    json_t *id = m && run->gpus ? json_array() : NULL;
    for (size_t i = 0; id && i < sizeof run->nccl_id; i++)
        json_array_append_new(id, json_integer(run->nccl_id[i]));
    if (id && json_object_set_new(json_object_get(m, "run"), "nccl_id", id)) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* Loop thread (worker_assign of a follower's worker): the replica goes to its rank. */
static void assign_remote(void *ctx, struct worker *wk, struct task *t)
{
    struct world *w = ctx;
    int to = worker_rank(wk), proc = -1;
    bool files = false;
    pthread_mutex_lock(&w->mu);
    struct run *run = w->runs;
    while (run && run->tw != t->world)
        run = run->next;
    for (int p = 0; run && p < run->n_procs; p++)
        if (run->procs[p] == to)
            proc = p;
    if (run && proc >= 0) {
        files = !run->sent[proc];
        run->sent[proc] = true;
        run->tasks[t->rank] = t;
    }
    pthread_mutex_unlock(&w->mu);
    struct err e = {0};
    bool registered = run && proc >= 0;
    if (!registered)
        err_set(&e, ERR_INTERNAL, "world: replica %d has no run on rank %d", t->rank, to);
    else if (!world_send_json(w->mpi, to, run_message(run, proc, t, worker_index(wk), files), &e) && files) {
        if (t->resume_from)
            send_file(w, to, t->resume_from, -1, &e);
        if (!e.code && t->init_fd >= 0)
            send_file(w, to, NULL, t->init_fd, &e);
    }
    if (!e.code)
        return;
    log_error("job %s: replica %d on rank %d: %s", t->job_id, t->rank, to, e.msg);
    pthread_mutex_lock(&w->mu);
    bool ours = registered && run->tasks[t->rank] == t;
    if (ours)
        run->tasks[t->rank] = NULL;
    pthread_mutex_unlock(&w->mu);
    replica_leave(t->world, t->rank, &e);   /* its peers here must not wait for it */
    if (!registered || ours) {
        struct task_event *done = t->done;
        t->done = NULL;
        done->err = e;
        t->emit(t->emit_ctx, done);
    }
}

struct worker_remote world_remote(struct world *w)
{
    return (struct worker_remote){.assign = assign_remote, .ctx = w};
}

void world_quiet(struct world *w)
{
    if (!w || !w->started)
        return;
    atomic_store(&w->quiet, true);
    pthread_join(w->thread, NULL);
    w->started = false;
}

void world_end(struct world *w)
{
    if (!w)
        return;
    world_quiet(w);
    for (int r = 1; r < w->size; r++) {
        struct err e = {0};
        if (world_send_json(w->mpi, r, json_pack("{s:{}}", "exit"), &e))
            log_warn("rank %d: %s", r, e.msg);
    }
    while (w->runs) {
        struct run *run = w->runs;
        w->runs = run->next;
        run_free(run);
    }
    pthread_mutex_destroy(&w->mu);
    for (int r = 0; r < w->size; r++)
        json_decref(w->ranks[r].gpus);
    free(w->ranks);
    free(w);
}
