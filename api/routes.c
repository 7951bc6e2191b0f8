/* routes.c — routing and the handlers of the HTTP API (docs/api.md). */
#include "routes.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handlers.h"
#include "history.h"
#include "init_job.h"
#include "job_json.h"
#include "spec.h"
#include "spec_compile.h"

struct api_response *api_error(struct api_response *resp, unsigned status, const char *code,
                               const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_decref(resp->body);
    resp->status = status;
    resp->body = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
    return resp;
}

char *api_dump(const json_t *body, size_t *len)
{
    char *s = json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *out = realloc(s, n + 2);
    if (!out) {
        free(s);
        return NULL;
    }
    out[n] = '\n';
    out[n + 1] = '\0';
    *len = n + 1;
    return out;
}

void api_ok(struct api_response *resp, unsigned status, json_t *body)
{
    resp->status = status;
    resp->body = body;
    if (!body)
        api_error(resp, 500, "internal", "out of memory rendering the response");
}

#define ok api_ok

/* An optional integer query parameter in [lo, hi]; 0, or -1 with resp filled. */
static int query_int(const struct api_request *req, const char *key, long long lo, long long hi,
                     long long *out, struct api_response *resp)
{
    const char *v = req->query ? req->query(req->qctx, key) : NULL;
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        api_error(resp, 400, "invalid_argument", "query parameter '%s' must be an integer from %lld to %lld",
                  key, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* application/json or a +json type (application/merge+json), parameters allowed; not text/json. */
static int is_json_type(const char *ct)
{
    if (!ct)
        return 0;
    size_t n = strcspn(ct, ";");
    while (n && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    return (n == 16 && strncasecmp(ct, "application/json", 16) == 0) ||
           (n > 5 && strncasecmp(ct + n - 5, "+json", 5) == 0 && memchr(ct, '/', n) != NULL);
}

/* Strict like the spec: a query parameter the route does not take is a 400 naming it. */
static int known_params(const struct api_request *req, const char *const *known, struct api_response *resp)
{
    for (size_t i = 0; req->query_key && req->query_key(req->qctx, i); i++) {
        const char *key = req->query_key(req->qctx, i);
        size_t k = 0;
        while (known[k] && strcmp(known[k], key) != 0)
            k++;
        if (known[k])
            continue;
        char takes[96] = "";
        for (k = 0; known[k]; k++)
            snprintf(takes + strlen(takes), sizeof takes - strlen(takes), "%s%s", k ? ", " : "", known[k]);
        api_error(resp, 400, "invalid_argument", "unknown query parameter '%.64s' (%s%s)", key,
                  takes[0] ? "this path takes " : "this path takes none", takes);
        json_object_set_new(json_object_get(resp->body, "error"), "parameter", json_string(key));
        return -1;
    }
    return 0;
}

static const char *const no_params[] = {NULL};
static const char *const jobs_params[] = {"state", "limit", "after", NULL};
static const char *const metrics_params[] = {"since", "limit", "max_points", "wait", NULL};

int api_json_type_ok(const struct api_request *req, struct api_response *resp, const char *what)
{
    if (is_json_type(req->content_type))
        return 1;
    api_error(resp, 415, "unsupported_media_type",
              "send %s as JSON with 'Content-Type: application/json' (got %s)", what,
              req->content_type ? "another type" : "none");
    return 0;
}

json_t *api_json_parse(const char *body, size_t len, struct api_response *resp)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        api_error(resp, 400, "invalid_json", "the body is not valid JSON: %s at line %d, column %d",
                  jerr.text, jerr.line, jerr.column);
        json_t *eo = json_object_get(resp->body, "error");
        json_object_set_new(eo, "line", json_integer(jerr.line));
        json_object_set_new(eo, "column", json_integer(jerr.column));
    }
    return root;
}

/* The body as JSON, or NULL with a 415 or 400 in resp. */
static json_t *json_body(const struct api_request *req, struct api_response *resp, const char *what)
{
    return api_json_type_ok(req, resp, what) ? api_json_parse(req->body, req->body_len, resp) : NULL;
}

/* Whether spec is the one j was submitted with: their canonical forms are equal. */
static bool same_spec(const struct job *j, const struct job_spec *spec)
{
    if (job_unreadable(j))
        return false;
    json_t *a = spec_to_json(job_spec(j)), *b = spec_to_json(spec);
    bool same = a && b && json_equal(a, b);
    json_decref(a);
    json_decref(b);
    return same;
}

/* 400 invalid_spec naming field, as every refused spec gets. */
static void spec_refused(struct api_response *resp, const char *field, const char *message)
{
    api_error(resp, 400, "invalid_spec", "%s%s%s", field, field[0] ? ": " : "", message);
    json_object_set_new(json_object_get(resp->body, "error"), "field", json_string(field));
}

/* The daemon signs S3 requests with its credentials: a spec may send them only where the operator said. */
static bool endpoint_allowed(const struct api_ctx *ctx, const struct job_spec *spec)
{
    return !spec->data.endpoint || cfg_s3_endpoint_allowed(ctx->cfg, spec->data.endpoint);
}

/* A model whose parameters alone pass --model-max-bytes (with one feature: the data adds more) is refused. */
static bool model_too_big(const struct api_ctx *ctx, const struct job_spec *spec, struct api_response *resp)
{
    uint64_t bytes = spec_model_bytes(spec, 1, 0);
    if (!ctx->cfg || bytes <= ctx->cfg->model_max_bytes)
        return false;
    char msg[256];
    snprintf(msg, sizeof msg, "the model's parameters would take %llu bytes or more, over the %llu that "
             "--model-max-bytes allows", (unsigned long long)bytes, ctx->cfg->model_max_bytes);
    spec_refused(resp, spec->model == SPEC_MODEL_MLP ? "model.hidden"
                       : spec->model == SPEC_MODEL_LAYERS ? "model.layers" : "model", msg);
    return true;
}

static void post_jobs(const struct api_ctx *ctx, const struct api_request *req,
                      struct api_response *resp)
{
    if (sched_draining(ctx->sched)) {
        api_error(resp, 503, "unavailable", "traind is shutting down; submit the job again once it is back");
        return;
    }
    json_t *root = json_body(req, resp, "the job spec");
    if (!root)
        return;
    struct job_spec *spec;
    struct spec_error se;
    int rc = spec_parse(root, &spec, &se);
    json_decref(root);
    if (rc) {
        spec_refused(resp, se.field, se.message);
        return;
    }
    if (!endpoint_allowed(ctx, spec)) {
        spec_free(spec);
        spec_refused(resp, "data.endpoint", "not an S3 endpoint this daemon may send its credentials to; "
                     "its operator names them with --s3-endpoint (or AWS_ENDPOINT_URL)");
        return;
    }
    char why[256];
    if (sched_replicas_refused(ctx->sched, spec, why, sizeof why)) {
        spec_free(spec);
        spec_refused(resp, "replicas", why);
        return;
    }
    if (model_too_big(ctx, spec, resp)) {
        spec_free(spec);
        return;
    }
    struct job *j = spec->client_id ? job_registry_find_client_id(ctx->reg, spec->client_id) : NULL;
    if (!j && init_from_check(ctx->reg, spec, &se)) {
        spec_free(spec);
        spec_refused(resp, se.field, se.message);
        return;
    }
    if (j) {
        /* Idempotent resubmission: the first job with this client_id stands, if it is the same job. */
        bool same = same_spec(j, spec);
        spec_free(spec);
        if (!same) {
            api_error(resp, 409, "conflict", "client_id is taken by job %s, whose spec differs; "
                      "send that spec or another client_id", job_id(j));
            json_object_set_new(json_object_get(resp->body, "error"), "job", json_string(job_id(j)));
            return;
        }
        ok(resp, 200, api_job_json(j, 1));
        snprintf(resp->location, sizeof resp->location, "/jobs/%s", job_id(j));
        return;
    }
    struct err e = {0};
    j = job_registry_add(ctx->reg, spec, &e);
    if (!j && e.code == ERR_IO) {
        /* Not committed, so not acknowledged: the same client_id may be sent again. */
        api_error(resp, 503, "unavailable", "the job was not recorded, so it was not accepted "
                  "(the state database cannot be written); submit it again later");
        return;
    }
    if (!j) {
        api_error(resp, 500, err_code_name(e.code), "%s", e.msg);
        return;
    }
    sched_kick(ctx->sched);
    ok(resp, 201, api_job_json(j, 1));
    snprintf(resp->location, sizeof resp->location, "/jobs/%s", job_id(j));
}

static void get_jobs(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    const char *state = req->query ? req->query(req->qctx, "state") : NULL;
    enum job_state want = JOB_QUEUED;
    if (state && job_state_parse(state, &want)) {
        char states[128] = "";
        for (int k = 0; k <= JOB_CANCELLED; k++)
            snprintf(states + strlen(states), sizeof states - strlen(states), "%s%s", k ? ", " : "",
                     job_state_name((enum job_state)k));
        api_error(resp, 400, "invalid_argument", "state must be one of %s", states);
        return;
    }
    long long limit = 100;
    if (query_int(req, "limit", 1, 10000, &limit, resp))
        return;
    /* after=ID: the page continues with the jobs listed after ID (older ones). */
    const char *after = req->query ? req->query(req->qctx, "after") : NULL;
    size_t start = job_registry_count(ctx->reg);
    if (after) {
        size_t i = 0;
        while (i < start && strcmp(job_id(job_registry_at(ctx->reg, i)), after) != 0)
            i++;
        if (i == start) {
            api_error(resp, 400, "invalid_argument", "after: no job with id '%.64s'", after);
            return;
        }
        start = i;
    }
    json_t *jobs = json_array();
    const struct job *last = NULL;
    size_t i = start;
    while (jobs && i > 0 && (long long)json_array_size(jobs) < limit) {
        const struct job *j = job_registry_at(ctx->reg, --i);
        if (!state || job_state(j) == want) {
            json_array_append_new(jobs, api_job_json(j, 0));
            last = j;
        }
    }
    /* next_after only when a matching job is left for the next page (jobs [0, i) are unseen). */
    int more = 0;
    for (size_t k = i; last && k > 0 && !more; k--)
        more = !state || job_state(job_registry_at(ctx->reg, k - 1)) == want;
    json_t *body = jobs ? json_pack("{s:o, s:o}", "jobs", jobs, "next_after",
                                    more ? json_string(job_id(last)) : json_null())
                        : NULL;
    ok(resp, 200, body);
}

static int is_terminal(enum job_state st)
{
    return job_is_terminal(st);
}

static void get_metrics(const struct api_ctx *ctx, const struct job *j, const struct api_request *req,
                        struct api_response *resp)
{
    /* A downsampled page spans the whole history unless told otherwise: it is max_points long. */
    long long since = 0, limit = -1, wait = 0, max_points = 0;
    if (query_int(req, "since", 0, INT64_MAX, &since, resp) ||
        query_int(req, "limit", 1, API_METRICS_MAX_ROWS, &limit, resp) ||
        query_int(req, "max_points", 4, 100000, &max_points, resp) ||
        query_int(req, "wait", 0, API_MAX_WAIT_S, &wait, resp))
        return;
    /* Nothing new yet and more may come: let the server park the request. */
    if (wait > 0 && !req->no_wait && job_iterations_done(j) <= since && !is_terminal(job_state(j))) {
        resp->wait_ms = (unsigned)wait * 1000u;
        snprintf(resp->wait_job, sizeof resp->wait_job, "%s", job_id(j));
        return;
    }
    if (limit < 0 && max_points == 0)
        limit = 10000;
    struct err e = {0};
    /* A long page of every row is sent as it is rendered, so it never lies whole in memory. */
    if (max_points == 0 && limit > HIST_STREAM_ROWS)
        resp->stream = db_metrics_stream(ctx->db, j, since, limit, &e);
    else
        resp->text = db_metrics_text(ctx->db, j, since, limit, max_points, &resp->text_len, &e);
    if (!resp->text && !resp->stream) {
        api_error(resp, e.code == ERR_NOMEM ? 500 : 503, e.code == ERR_NOMEM ? "internal" : "unavailable",
                  "the metrics history cannot be read: %s", e.msg);
        return;
    }
    resp->status = 200;
    resp->content_type = "application/json";
}

/* cancel, pause and resume share a shape: the scheduler says yes (202 + the job) or it is a conflict. */
static void post_control(const struct api_ctx *ctx, struct job *j, int (*op)(struct sched *, struct job *),
                         const char *verb, struct api_response *resp)
{
    if (op(ctx->sched, j)) {
        api_error(resp, 409, "conflict", "job %s is %s; it cannot be %s", job_id(j),
                  job_state_name(job_state(j)), verb);
        return;
    }
    ok(resp, 202, api_job_json(j, 0));
}

static void delete_job(const struct api_ctx *ctx, struct job *j, struct api_response *resp)
{
    char id[32];
    snprintf(id, sizeof id, "%s", job_id(j));
    if (job_registry_remove(ctx->reg, j)) {
        api_error(resp, 409, "conflict", "job %s is %s; cancel it first, then delete it", id,
                  job_state_name(job_state(j)));
        return;
    }
    ok(resp, 200, json_pack("{s:s, s:b}", "id", id, "deleted", 1));
}

/* Each replica's figures while j runs as several; an empty list otherwise. */
static void get_replicas(const struct api_ctx *ctx, const struct job *j, struct api_response *resp)
{
    struct sched_replica rs[SPEC_MAX_REPLICAS];
    int n = sched_replicas(ctx->sched, j, rs, SPEC_MAX_REPLICAS);
    char host[256] = "";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    json_t *list = json_array();
    for (int r = 0; list && r < n; r++) {
        const struct replica_stats *st = &rs[r].st;
        json_array_append_new(list, json_pack("{s:i, s:s, s:s, s:I, s:{s:f, s:f, s:f}, s:f, s:f, s:f, s:i, s:o, s:b}",
            "rank", rs[r].rank, "host", rs[r].host ? rs[r].host : host, "device", rs[r].device, "iterations", (json_int_t)st->iterations,
            "step_seconds", "median", st->step_median, "last", st->step_last, "max", st->step_max,
            "data_wait_seconds", st->data_wait_s, "allreduce_seconds", st->reduce_s,
            "allreduce_hidden_seconds", st->reduce_hidden_s, "buckets", st->buckets,
            "work_seconds", st->work_median > 0 ? json_real(st->work_median) : json_null(),
            "straggler", rs[r].straggler));
    }
    ok(resp, 200, list ? json_pack("{s:s, s:s, s:i, s:o}", "job", job_id(j), "state", job_state_name(job_state(j)),
                                   "replicas_asked", job_spec(j)->replicas, "replicas", list) : NULL);
}

/* The latest checkpoint file, sent as it is on disk. */
static void get_checkpoint(const struct job *j, struct api_response *resp)
{
    const char *path = NULL;
    int64_t it = job_latest_checkpoint(j, NULL, &path);
    if (it < 0) {
        api_error(resp, 404, "not_found", "job %s has no checkpoint yet", job_id(j));
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        api_error(resp, 410, "gone", "the checkpoint of job %s at iteration %lld is no longer on disk",
                  job_id(j), (long long)it);
        return;
    }
    resp->status = 200;
    resp->has_file = true;
    resp->file_fd = fd;
    resp->file_size = (uint64_t)st.st_size;
    snprintf(resp->filename, sizeof resp->filename, "%s-iter-%lld.safetensors", job_id(j), (long long)it);
}

static int method_is(const struct api_request *req, const char *m)
{
    return strcmp(req->method, m) == 0;
}

static void not_allowed(const struct api_request *req, struct api_response *resp, const char *allow)
{
    api_error(resp, 405, "method_not_allowed", "%s is not allowed on %s (allowed: %s)", req->method,
              req->path, allow);
    resp->allow = allow;
}

/* /jobs/{id}[/rest]: id and rest split out; 0 when path has that shape. */
static int split_job_path(const char *path, char *id, size_t cap, const char **rest)
{
    if (strncmp(path, "/jobs/", 6) != 0)
        return -1;
    const char *p = path + 6;
    size_t n = strcspn(p, "/");
    if (n == 0 || n >= cap)
        return -1;
    memcpy(id, p, n);
    id[n] = '\0';
    *rest = p + n;
    return 0;
}

enum job_route { R_JOB, R_METRICS, R_CANCEL, R_PAUSE, R_RESUME, R_CHECKPOINT, R_PREDICT, R_REPLICAS, R_NROUTES };

static const struct {
    const char *suffix;
    const char *allow;
    const char *const *params;        /* the query parameters it takes */
} job_routes[R_NROUTES] = {
    [R_JOB] = {"", "GET, HEAD, DELETE", no_params},
    [R_METRICS] = {"/metrics", "GET, HEAD", metrics_params},
    [R_CANCEL] = {"/cancel", "POST", no_params},
    [R_PAUSE] = {"/pause", "POST", no_params},
    [R_RESUME] = {"/resume", "POST", no_params},
    [R_CHECKPOINT] = {"/checkpoint", "GET, HEAD", no_params},
    [R_PREDICT] = {"/predict", "POST", no_params},
    [R_REPLICAS] = {"/replicas", "GET, HEAD", no_params},
};

/* Paths that only answer GET (and HEAD). */
static const struct {
    const char *path;
    void (*get)(const struct api_ctx *ctx, struct api_response *resp);
} info_routes[] = {
    {"/", api_get_dashboard},
    {"/healthz", api_get_healthz},
    {"/version", api_get_version},
    {"/devices", api_get_devices},
    {"/metrics", api_get_prometheus},
};

#define N_INFO_ROUTES (sizeof info_routes / sizeof *info_routes)

/* Where a request goes, known from its method and path alone: no job is looked up. */
struct route {
    enum { ROUTE_INFO, ROUTE_JOBS, ROUTE_JOB } kind;
    size_t info;                      /* ROUTE_INFO: index in info_routes */
    enum job_route job;               /* ROUTE_JOB: which one, for job id */
    char id[64];
    bool takes_body;                  /* POST /jobs and predict; every other request has none */
};

/* 0 and rt, or -1 with a 404 or 405 in resp (or a 400 for a query parameter the route does not take). */
static int match_route(const struct api_request *req, struct route *rt, struct api_response *resp)
{
    memset(rt, 0, sizeof *rt);
    int is_get = method_is(req, "GET") || method_is(req, "HEAD");
    const char *path = req->path;
    for (size_t i = 0; i < N_INFO_ROUTES; i++) {
        if (strcmp(path, info_routes[i].path) != 0)
            continue;
        if (!is_get) {
            not_allowed(req, resp, "GET, HEAD");
            return -1;
        }
        rt->kind = ROUTE_INFO;
        rt->info = i;
        return known_params(req, no_params, resp);
    }
    if (strcmp(path, "/jobs") == 0) {
        if (!is_get && !method_is(req, "POST")) {
            not_allowed(req, resp, "GET, HEAD, POST");
            return -1;
        }
        rt->kind = ROUTE_JOBS;
        rt->takes_body = !is_get;
        return known_params(req, is_get ? jobs_params : no_params, resp);
    }
    const char *rest;
    if (split_job_path(path, rt->id, sizeof rt->id, &rest) != 0) {
        api_error(resp, 404, "not_found", "no such resource: %s", path);
        return -1;
    }
    int k = 0;
    while (k < R_NROUTES && strcmp(rest, job_routes[k].suffix) != 0)
        k++;
    if (k == R_NROUTES) {
        api_error(resp, 404, "not_found", "no such resource: %s", path);
        return -1;
    }
    int allowed = strcmp(job_routes[k].allow, "POST") == 0 ? method_is(req, "POST")
                                                           : is_get || (k == R_JOB && method_is(req, "DELETE"));
    if (!allowed) {
        not_allowed(req, resp, job_routes[k].allow);
        return -1;
    }
    rt->kind = ROUTE_JOB;
    rt->job = (enum job_route)k;
    rt->takes_body = k == R_PREDICT;
    return known_params(req, job_routes[k].params, resp);
}

/*
 * A body where none is taken is refused unread, as too large (RFC 9110 gives a GET body no
 * meaning, and 413 lets the server answer without reading it); the largest allowed is 0 bytes.
 */
static int admit(const struct api_request *req, bool has_body, struct route *rt, struct api_response *resp)
{
    if (match_route(req, rt, resp))
        return -1;
    if (has_body && !rt->takes_body) {
        api_error(resp, 413, "payload_too_large", "%s %s takes no body", req->method, req->path);
        return -1;
    }
    return 0;
}

int api_route_admit(const struct api_request *req, bool has_body, struct api_response *resp)
{
    memset(resp, 0, sizeof *resp);
    struct route rt;
    return admit(req, has_body, &rt, resp);
}

static void route_job(const struct api_ctx *ctx, const struct api_request *req, const struct route *rt,
                      struct api_response *resp)
{
    struct job *j = job_registry_find(ctx->reg, rt->id);
    if (!j) {
        api_error(resp, 404, "not_found", "no job with id '%s'", rt->id);
        return;
    }
    switch (rt->job) {
    case R_JOB:
        if (method_is(req, "DELETE"))
            delete_job(ctx, j, resp);
        else
            ok(resp, 200, api_job_json(j, 1));
        break;
    case R_METRICS: get_metrics(ctx, j, req, resp); break;
    case R_CANCEL: post_control(ctx, j, sched_cancel, "cancelled", resp); break;
    case R_PAUSE: post_control(ctx, j, sched_pause, "paused (only queued and running jobs can)", resp); break;
    case R_RESUME: post_control(ctx, j, sched_resume, "resumed (only paused jobs can)", resp); break;
    case R_CHECKPOINT: get_checkpoint(j, resp); break;
    case R_PREDICT: api_post_predict(ctx, j, req, resp); break;
    case R_REPLICAS: get_replicas(ctx, j, resp); break;
    case R_NROUTES: break;
    }
}

void api_route(const struct api_ctx *ctx, const struct api_request *req, struct api_response *resp)
{
    memset(resp, 0, sizeof *resp);
    struct route rt;
    if (admit(req, req->body_len > 0, &rt, resp))
        return;
    switch (rt.kind) {
    case ROUTE_INFO: info_routes[rt.info].get(ctx, resp); break;
    case ROUTE_JOBS:
        if (rt.takes_body)
            post_jobs(ctx, req, resp);
        else
            get_jobs(ctx, req, resp);
        break;
    case ROUTE_JOB: route_job(ctx, req, &rt, resp); break;
    }
}
