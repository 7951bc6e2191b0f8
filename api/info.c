/* info.c — the endpoints about the daemon rather than a job: /healthz, /version, /devices, /metrics. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "handlers.h"
#include "traind_config.h"
#include "world.h"

void api_get_healthz(const struct api_ctx *ctx, struct api_response *resp)
{
    api_ok(resp, 200, json_pack("{s:s}", "status", "ok"));
}

static const struct devices_info no_gpus = {.gpu_why = "built without CUDA"};

void api_get_version(const struct api_ctx *ctx, struct api_response *resp)
{
    api_ok(resp, 200, devices_version_json(ctx->devices ? ctx->devices : &no_gpus, TRAIND_VERSION));
}

/* The id of the job running on device, or null. */
static json_t *job_on(const struct api_ctx *ctx, const char *device)
{
    for (size_t i = 0; i < job_registry_count(ctx->reg); i++) {
        const struct job *j = job_registry_at(ctx->reg, i);
        if (job_state(j) == JOB_RUNNING && strcmp(job_device(j), device) == 0)
            return json_string(job_id(j));
    }
    return json_null();
}

/* Under mpirun: every rank, its host, GPUs and workers, each with the job it trains; own_gpus: rank 0's. */
static json_t *ranks_json(const struct api_ctx *ctx, json_t *own_gpus)
{
    json_t *ranks = world_ranks_json(ctx->world, own_gpus);
    for (size_t r = 0; r < json_array_size(ranks); r++) {
        json_t *workers = json_array();
        for (int k = 0; workers && ctx->sched && k < sched_worker_count(ctx->sched); k++) {
            int rank;
            const struct job *j;
            const char *name = sched_worker_at(ctx->sched, k, &rank, &j);
            if ((size_t)rank == r)
                json_array_append_new(workers, json_pack("{s:s, s:o}", "device", name, "job",
                                                         j ? json_string(job_id(j)) : json_null()));
        }
        json_object_set_new(json_array_get(ranks, r), "workers", workers ? workers : json_array());
    }
    return ranks ? ranks : json_array();
}

void api_get_devices(const struct api_ctx *ctx, struct api_response *resp)
{
    json_t *o = devices_to_json(ctx->devices ? ctx->devices : &no_gpus);
    if (o) {
        json_t *gpus = json_object_get(o, "gpus");
        for (size_t i = 0; i < json_array_size(gpus); i++) {
            json_t *g = json_array_get(gpus, i);
            const char *dev = json_string_value(json_object_get(g, "device"));
            json_object_set_new(g, "job", job_on(ctx, dev));
            struct sched_gpu_state st;
            bool known = ctx->sched && dev && sched_gpu_state(ctx->sched, dev, &st);
            if (known && st.has_memory) {
                json_object_set_new(g, "memory_allocated", json_integer((json_int_t)st.allocated));
                json_object_set_new(g, "memory_reserved", json_integer((json_int_t)st.reserved));
            }
            json_object_set_new(g, "error", known && st.error ? json_string(st.error->msg) : json_null());
        }
        /* CPU workers are "cpu" or "cpu:N": list every job running on one of them. */
        json_t *jobs = json_array();
        for (size_t i = 0; jobs && i < job_registry_count(ctx->reg); i++) {
            const struct job *j = job_registry_at(ctx->reg, i);
            if (job_state(j) == JOB_RUNNING && strncmp(job_device(j), "cpu", 3) == 0)
                json_array_append_new(jobs, json_string(job_id(j)));
        }
        json_object_set_new(json_object_get(o, "cpu"), "jobs", jobs ? jobs : json_null());
        if (world_size(ctx->world) > 1)
            json_object_set_new(o, "ranks", ranks_json(ctx, json_object_get(o, "gpus")));
    }
    api_ok(resp, 200, o);
}

/* A growing text buffer; on out of memory it stops growing and says so at the end. */
struct text {
    char *p;
    size_t n, cap;
    int failed;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
    for (int attempt = 0; attempt < 2 && !t->failed; attempt++) {
        va_list ap;
        va_start(ap, fmt);
        int need = vsnprintf(t->p ? t->p + t->n : NULL, t->p ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (need < 0) {
            t->failed = 1;
            return;
        }
        if (t->p && t->n + (size_t)need < t->cap) {
            t->n += (size_t)need;
            return;
        }
        if (buf_reserve(&t->p, &t->cap, t->n + (size_t)need + 1))
            t->failed = 1;
    }
}

static void put_real(struct text *t, const char *name, const char *id, double v)
{
    if (isnan(v))
        put(t, "%s{job=\"%s\"} NaN\n", name, id);
    else if (isinf(v))
        put(t, "%s{job=\"%s\"} %s\n", name, id, v > 0 ? "+Inf" : "-Inf");
    else
        put(t, "%s{job=\"%s\"} %.17g\n", name, id, v);
}

/* Each replica's median step, per job running as several: a straggler stands out. */
static void put_replicas(const struct api_ctx *ctx, struct text *t)
{
    char host[256] = "";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    put(t, "# HELP traind_replica_step_seconds Median seconds of a step over the last 64, per replica of a "
           "job running as several.\n# TYPE traind_replica_step_seconds gauge\n");
    for (size_t i = 0; i < job_registry_count(ctx->reg); i++) {
        const struct job *j = job_registry_at(ctx->reg, i);
        struct sched_replica rs[SPEC_MAX_REPLICAS];
        int n = job_state(j) == JOB_RUNNING ? sched_replicas(ctx->sched, j, rs, SPEC_MAX_REPLICAS) : 0;
        for (int r = 0; r < n; r++)
            put(t, "traind_replica_step_seconds{job=\"%s\",replica=\"%d\",host=\"%s\"} %.9g\n", job_id(j), r,
                rs[r].host ? rs[r].host : host, rs[r].st.step_median);
    }
}

void api_get_prometheus(const struct api_ctx *ctx, struct api_response *resp)
{
    struct text t = {0};
    size_t by_state[JOB_CANCELLED + 1] = {0};
    for (size_t i = 0; i < job_registry_count(ctx->reg); i++)
        by_state[job_state(job_registry_at(ctx->reg, i))]++;
    put(&t, "# HELP traind_jobs Jobs known to the daemon, by state.\n# TYPE traind_jobs gauge\n");
    for (int s = 0; s <= JOB_CANCELLED; s++)
        put(&t, "traind_jobs{state=\"%s\"} %zu\n", job_state_name((enum job_state)s), by_state[s]);
    put(&t, "# HELP traind_queue_depth Jobs waiting for a worker.\n# TYPE traind_queue_depth gauge\n"
            "traind_queue_depth %zu\n", sched_queue_depth(ctx->sched));
    /* Per job only while it is live, so the series stay few however many jobs have ended. */
    put(&t, "# HELP traind_job_iteration Iterations done, per queued, running or paused job.\n"
            "# TYPE traind_job_iteration gauge\n");
    for (size_t i = 0; i < job_registry_count(ctx->reg); i++) {
        const struct job *j = job_registry_at(ctx->reg, i);
        if (!job_is_terminal(job_state(j)))
            put(&t, "traind_job_iteration{job=\"%s\"} %lld\n", job_id(j), (long long)job_iterations_done(j));
    }
    put(&t, "# HELP traind_job_loss Latest training loss, per queued, running or paused job.\n"
            "# TYPE traind_job_loss gauge\n");
    for (size_t i = 0; i < job_registry_count(ctx->reg); i++) {
        const struct job *j = job_registry_at(ctx->reg, i);
        const struct metrics_row *r = job_last_metrics(j);
        if (!job_is_terminal(job_state(j)) && r)
            put_real(&t, "traind_job_loss", job_id(j), r->v[METRIC_LOSS]);
    }
    put(&t, "# HELP traind_job_eval_loss Latest loss on data.test, per queued, running or paused job "
            "that has evaluated.\n# TYPE traind_job_eval_loss gauge\n");
    for (size_t i = 0; i < job_registry_count(ctx->reg); i++) {
        const struct job *j = job_registry_at(ctx->reg, i);
        double loss;
        if (!job_is_terminal(job_state(j)) && job_last_eval(j, &loss) >= 0)
            put_real(&t, "traind_job_eval_loss", job_id(j), loss);
    }
    put_replicas(ctx, &t);
    put(&t, "# HELP traind_http_requests_total HTTP requests answered, by status code.\n"
            "# TYPE traind_http_requests_total counter\n");
    for (int code = 100; ctx->stats && code < API_MAX_STATUS; code++)
        if (ctx->stats->responses[code])
            put(&t, "traind_http_requests_total{code=\"%d\"} %llu\n", code,
                (unsigned long long)ctx->stats->responses[code]);
    struct db_stats ds;
    db_stats(ctx->db, &ds);
    put(&t, "# HELP traind_state_db_bytes Size of the state database, by file (free: pages a deleted "
            "job left, reused first).\n# TYPE traind_state_db_bytes gauge\n"
            "traind_state_db_bytes{file=\"db\"} %llu\ntraind_state_db_bytes{file=\"free\"} %llu\n"
            "traind_state_db_bytes{file=\"wal\"} %llu\n",
        (unsigned long long)ds.file_bytes, (unsigned long long)ds.free_bytes, (unsigned long long)ds.wal_bytes);
    put(&t, "# HELP traind_state_db_write_errors_total State database transactions that failed "
            "(each is retried).\n# TYPE traind_state_db_write_errors_total counter\n"
            "traind_state_db_write_errors_total %llu\n", (unsigned long long)ds.write_errors);
    put(&t, "# HELP traind_state_db_unwritten What waits to be written to the state database.\n"
            "# TYPE traind_state_db_unwritten gauge\n"
            "traind_state_db_unwritten{kind=\"job_changes\"} %llu\n"
            "traind_state_db_unwritten{kind=\"metrics_rows\"} %llu\n",
        (unsigned long long)ds.owed_changes, (unsigned long long)ds.pending_rows);
    put(&t, "# HELP traind_state_db_dropped_rows_total Metrics rows lost because the state database "
            "could not be written for too long.\n# TYPE traind_state_db_dropped_rows_total counter\n"
            "traind_state_db_dropped_rows_total %llu\n", (unsigned long long)ds.dropped_rows);
    put(&t, "# HELP traind_process_resident_memory_bytes Resident set size of traind.\n"
            "# TYPE traind_process_resident_memory_bytes gauge\n"
            "traind_process_resident_memory_bytes %llu\n", (unsigned long long)devices_self_rss());
    if (t.failed) {
        free(t.p);
        api_error(resp, 500, "internal", "out of memory rendering the metrics");
        return;
    }
    resp->status = 200;
    resp->text = t.p;
    resp->text_len = t.n;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}
