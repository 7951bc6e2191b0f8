/* world_follow.c — a follower rank: hello to rank 0, then the replicas it sends run on this rank's workers. */
#include "world.h"
#include "world_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "devices.h"
#include "log.h"
#include "replica.h"
#include "spec.h"
#include "task.h"

/* A job's replicas on this rank, from its first run message until the last is done. */
struct frun {
    struct frun *next;
    int tag;
    struct train_world *tw;
    struct job_spec *spec;
    int left;                     /* tasks not done */
    int offset, local;            /* its replicas here: [offset, offset + local) */
    struct err failed;            /* it could not start: each replica fails with this */
    char resume[64], init[64];    /* the files rank 0 sent ("": none), removed at the end */
};

struct follower {
    struct comm_mpi *mpi;
    const struct sched_config *cfg;
    struct worker **workers;      /* its n_cpu CPU workers, then its GPUs' */
    int n_workers, n_cpu;
    struct frun *runs;
    pthread_mutex_t mu;           /* guards done: the workers' DONE events, for the main thread */
    struct task_event *done;      /* a stack, linked through node.next */
};

/* Worker thread: a task's last word is queued for the main thread, which alone talks to rank 0. */
static void emit(void *ctx, struct task_event *ev)
{
    struct follower *f = ctx;
    if (ev->kind != TASK_EV_DONE) {   /* metrics and checkpoints are rank 0's replica's */
        task_event_free(ev);
        return;
    }
    pthread_mutex_lock(&f->mu);
    ev->node.next = (struct mpsc_node *)f->done;
    f->done = ev;
    pthread_mutex_unlock(&f->mu);
}

static void frun_free(struct frun *r)
{
    train_world_free(r->tw);
    spec_free(r->spec);
    if (r->resume[0])
        unlink(r->resume);
    if (r->init[0])
        unlink(r->init);
    free(r);
}

/* One of r's replicas is done: r goes with the last. */
static void frun_done(struct follower *f, struct frun *r)
{
    if (--r->left > 0)
        return;
    struct frun **p = &f->runs;
    while (*p && *p != r)
        p = &(*p)->next;
    if (*p)
        *p = r->next;
    frun_free(r);
}

/* The next message from rank 0, a file's bytes, written to a temp file (path: its name). */
static int receive_file(struct follower *f, char *path, size_t cap, struct err *e)
{
    int from;
    char *b = NULL;
    size_t len = 0;
    if (comm_mpi_recv(f->mpi, &from, &b, &len, WORLD_SEND_MS, e))
        return e->code;
    if (!b)
        return err_set(e, ERR_INTERNAL, "world: a checkpoint did not follow its run message");
    const char *dir = getenv("TMPDIR");
    snprintf(path, cap, "%s/traind-ckpt-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    size_t done = 0;
    while (fd >= 0 && done < len) {
        ssize_t n = write(fd, b + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        done += (size_t)n;
    }
    free(b);
    if (fd < 0 || done < len || close(fd) != 0) {
        err_set(e, ERR_IO, "world: writing a checkpoint to %s: %s", path, strerror(errno));
        if (fd >= 0)
            unlink(path);
        path[0] = '\0';
        return e->code;
    }
    return 0;
}

/* The run of a first run message: its span across ranks, this rank's world, the spec and files. */
static int frun_new(struct follower *f, json_t *b, int tag, struct frun **out, struct err *e)
{
    json_t *procs = json_object_get(b, "procs");
    int n = (int)json_array_size(procs), ranks[SPEC_MAX_REPLICAS];
    int local = (int)json_integer_value(json_object_get(b, "local"));
    int offset = (int)json_integer_value(json_object_get(b, "offset"));
    int total = (int)json_integer_value(json_object_get(b, "total"));
    int me = (int)json_integer_value(json_object_get(b, "me"));
    struct frun *r = calloc(1, sizeof *r);
    if (!r)
        return err_set(e, ERR_NOMEM, "out of memory for a job's replicas");
    r->tag = tag;
    r->left = local;
    r->offset = offset;
    r->local = local;
    *out = r;
    for (int p = 0; p < n && p < SPEC_MAX_REPLICAS; p++)
        ranks[p] = (int)json_integer_value(json_array_get(procs, (size_t)p));
    struct comm_span *span = NULL;
    if (n > SPEC_MAX_REPLICAS || comm_span_new(f->mpi, ranks, n, me, tag, world_span_ms(f->cfg->allreduce_timeout_s),
                                                        &span, e))
        return e->code ? e->code : err_set(e, ERR_INTERNAL, "world: a run over %d ranks", n);
    if (train_world_new_span(local, offset, total, span, &r->tw, e))
        return e->code;
    json_t *id = json_object_get(b, "nccl_id");   /* GPU replicas: their communicator across ranks */
    unsigned char nccl_id[COMM_DEV_ID_BYTES];
    for (size_t i = 0; i < sizeof nccl_id && id; i++)
        nccl_id[i] = (unsigned char)json_integer_value(json_array_get(id, i));
    if (id && json_array_size(id) != sizeof nccl_id)
        err_set(e, ERR_INTERNAL, "world: a run's nccl_id of %zu bytes, not %zu", json_array_size(id), sizeof nccl_id);
    if (id && (e->code || train_world_span_gpus(r->tw, nccl_id, e)))
        return e->code;
    train_world_set_timeout(r->tw, f->cfg->allreduce_timeout_s > 0 ? f->cfg->allreduce_timeout_s
                                                                    : SCHED_ALLREDUCE_TIMEOUT_S);
    /* From here a failure ends the span, so rank 0 and the others do not wait for this rank. */
    struct spec_error se = {0};
    if (json_is_true(json_object_get(b, "resume")) && receive_file(f, r->resume, sizeof r->resume, e))
        return e->code;
    if (json_is_true(json_object_get(b, "init")) && receive_file(f, r->init, sizeof r->init, e))
        return e->code;
    if (spec_parse(json_object_get(b, "spec"), &r->spec, &se))
        return err_set(e, ERR_INTERNAL, "world: the spec rank 0 sent: %s: %s", se.field, se.message);
    return 0;
}

static void say_done(struct follower *f, int tag, int rank, const struct err *why)
{
    struct err e = {0};
    if (world_send_json(f->mpi, 0, json_pack("{s:{s:i, s:i, s:i, s:s}}", "done", "tag", tag, "rank", rank,
                                             "code", why->code, "message", why->msg), &e))
        log_error("cannot tell rank 0 that replica %d is done: %s", rank, e.msg);
}

/* A run message: the replica's task, on the worker rank 0 chose. */
static void on_run(struct follower *f, json_t *b)
{
    int tag = (int)json_integer_value(json_object_get(b, "tag"));
    int rank = (int)json_integer_value(json_object_get(b, "rank"));
    int index = (int)json_integer_value(json_object_get(b, "index"));
    struct err e = {0};
    struct frun *r = f->runs;
    while (r && r->tag != tag)
        r = r->next;
    if (!r) {
        if (frun_new(f, b, tag, &r, &e) && !r) {
            say_done(f, tag, rank, &e);
            return;
        }
        if (e.code) {
            r->failed = e;
            if (r->tw)
                replica_leave(r->tw, rank, &e);   /* the other ranks do not wait for this one */
        }
        r->next = f->runs;
        f->runs = r;
    }
    if (r->failed.code) {
        say_done(f, tag, rank, &r->failed);
        frun_done(f, r);
        return;
    }
    struct task *t = index >= 0 && index < f->n_workers
                         ? task_new(r->spec, f->cfg->data_roots, f->cfg->n_data_roots, r) : NULL;
    const char *job_id = json_string_value(json_object_get(b, "job_id"));
    if (t)
        snprintf(t->job_id, sizeof t->job_id, "%s", job_id ? job_id : "");
    if (t && r->resume[0] && !(t->resume_from = strdup(r->resume)))
        err_set(&e, ERR_NOMEM, "out of memory");
    if (t && r->init[0] && (t->init_fd = open(r->init, O_RDONLY | O_CLOEXEC)) < 0)
        err_set(&e, ERR_IO, "%s: %s", r->init, strerror(errno));
    if (!t || e.code) {
        if (!e.code)
            err_set(&e, ERR_INTERNAL, "world: no worker %d for replica %d", index, rank);
        task_free(t);
        replica_leave(r->tw, rank, &e);
        say_done(f, tag, rank, &e);
        frun_done(f, r);
        return;
    }
    t->cache_dir = f->cfg->cache_dir;
    t->cache_limit = f->cfg->cache_limit;
    t->list_limits = f->cfg->list_limits;
    t->emit = emit;
    t->emit_ctx = f;
    t->world = r->tw;
    t->rank = rank;
    worker_assign(f->workers[index], t);
}

/* The workers' DONE events: told to rank 0; a run's world goes with its last task. */
static void report_done(struct follower *f, bool tell)
{
    pthread_mutex_lock(&f->mu);
    struct task_event *ev = f->done;
    f->done = NULL;
    pthread_mutex_unlock(&f->mu);
    while (ev) {
        struct task_event *next = (struct task_event *)ev->node.next;
        struct task *t = ev->task;
        struct frun *r = t->owner;
        if (tell)
            say_done(f, r->tag, t->rank, &ev->err);
        task_event_free(ev);
        task_free(t);
        frun_done(f, r);
        ev = next;
    }
}

/* Every second: each run's replicas' figures to rank 0, which shows them as its own. */
static void report_stats(struct follower *f)
{
    for (struct frun *r = f->runs; r; r = r->next) {
        if (r->failed.code)
            continue;
        json_t *list = json_array();
        for (int k = r->offset; list && k < r->offset + r->local; k++) {
            struct replica_stats st;
            train_world_stats(r->tw, k, &st);
            json_array_append_new(list, json_pack("{s:i, s:I, s:f, s:f, s:f, s:f, s:f, s:i, s:f}", "rank", k,
                                                  "iterations", (json_int_t)st.iterations, "step_last", st.step_last,
                                                  "step_max", st.step_max, "step_median", st.step_median,
                                                  "data_wait_s", st.data_wait_s, "reduce_s", st.reduce_s,
                                                  "buckets", st.buckets, "reduce_hidden_s", st.reduce_hidden_s));
        }
        struct err e = {0};
        if (list && world_send_json(f->mpi, 0, json_pack("{s:{s:i, s:o}}", "stats", "tag", r->tag, "replicas", list), &e))
            log_warn("rank %d: %s", comm_mpi_rank(f->mpi), e.msg);
    }
}

/* Its CPU workers, then one a GPU that --gpus uses, in cfg->devices' order (world.h). */
static int start_workers(struct follower *f)
{
    int n = f->cfg->cpu_workers > 0 ? f->cfg->cpu_workers : 1;
    const struct devices_info *dv = f->cfg->devices;
    int gpus = dv ? dv->n_gpus : 0;
    if (!(f->workers = calloc((size_t)(n + gpus), sizeof *f->workers)))
        return -1;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n + gpus; i++) {
        const struct devices_gpu *g = i >= n ? &dv->gpus[i - n] : NULL;
        if (g && !g->used)
            continue;
        char name[16];
        struct err e = {0};
        if (g)
            snprintf(name, sizeof name, "cuda:%d", g->index);
        else
            snprintf(name, sizeof name, n == 1 ? "cpu" : "cpu:%d", i);
        if (worker_start(name, g ? g->index : -1, g ? g->pci_bus_id : NULL, f->cfg->gpu_backends,
                         &f->workers[f->n_workers], &e)) {
            log_error("%s", e.msg);
            return -1;
        }
        f->n_workers++;
    }
    for (int i = n; i < f->n_workers; i++)
        worker_wait_ready(f->workers[i], &t0);
    f->n_cpu = n;
    return 0;
}

/* The hello: host, CPU workers, GPUs as GET /devices lists them, and whether NCCL loads here. */
static json_t *hello(const struct follower *f, const char *host)
{
    static const struct devices_info none = {.gpu_why = "built without CUDA"};
    json_t *d = devices_to_json(f->cfg->devices ? f->cfg->devices : &none);
    json_t *gpus = d ? json_incref(json_object_get(d, "gpus")) : NULL;
    json_decref(d);
    struct err e = {0};
    bool nccl = gpus && json_array_size(gpus) && comm_dev_available(&e);
    return gpus ? json_pack("{s:{s:s, s:i, s:o, s:b}}", "hello", "host", host, "cpu_workers", f->n_cpu,
                            "gpus", gpus, "nccl", nccl)
                : NULL;
}

int world_follow(struct comm_mpi *mpi, const struct sched_config *cfg)
{
    struct follower f = {.mpi = mpi, .cfg = cfg};
    pthread_mutex_init(&f.mu, NULL);
    /* mpirun passes SIGTERM and SIGUSR1 on to every rank: rank 0 stops the jobs, then tells us to exit. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGUSR1, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    struct err e = {0};
    int status = 1;
    if (start_workers(&f) || world_send_json(mpi, 0, hello(&f, host), &e)) {
        log_error("rank %d: cannot join rank 0: %s", comm_mpi_rank(mpi), e.msg);
        goto out;
    }
    log_info("rank %d on %s follows rank 0 with %d CPU worker%s and %d GPU%s", comm_mpi_rank(mpi), host, f.n_cpu,
             f.n_cpu == 1 ? "" : "s", f.n_workers - f.n_cpu, f.n_workers - f.n_cpu == 1 ? "" : "s");
    for (struct timespec last = {0};;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec != last.tv_sec) {
            report_stats(&f);
            last = now;
        }
        int from = -1;
        const char *kind = NULL;
        json_t *body = NULL;
        json_t *o = world_recv_json(mpi, 20, &from, &kind, &body, &e);
        if (!o && e.code) {
            log_warn("%s", e.msg);
            err_clear(&e);
        }
        report_done(&f, true);
        if (!o)
            continue;
        bool exit_now = strcmp(kind, "exit") == 0;
        if (strcmp(kind, "run") == 0)
            on_run(&f, body);
        else if (!exit_now)
            log_warn("world: rank 0 sent '%s', which a follower does not take", kind);
        json_decref(o);
        if (exit_now)
            break;
    }
    status = 0;
out:
    for (struct frun *r = f.runs; r; r = r->next) {   /* rank 0 is gone: end what still runs */
        struct err gone = {0};
        err_set(&gone, ERR_CANCELLED, "rank 0 ended the world");
        if (r->tw)
            replica_leave(r->tw, r->offset, &gone);
    }
    for (int i = 0; i < f.n_workers; i++)
        worker_stop(f.workers[i]);
    report_done(&f, false);   /* rank 0 is gone, or going */
    for (int i = 0; i < f.n_workers; i++)
        worker_free(f.workers[i]);
    free(f.workers);
    pthread_mutex_destroy(&f.mu);
    return status;
}
