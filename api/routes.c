/* routes.c — routing and the handlers of DESIGN.md §4 that exist so far. */
#include "routes.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "spec.h"
#include "traind_config.h"

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

static void ok(struct api_response *resp, unsigned status, json_t *body)
{
    resp->status = status;
    resp->body = body;
    if (!body)
        api_error(resp, 500, "internal", "out of memory rendering the response");
}

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

static void get_healthz(struct api_response *resp)
{
    ok(resp, 200, json_pack("{s:s}", "status", "ok"));
}

static void get_version(struct api_response *resp)
{
    ok(resp, 200, json_pack("{s:s, s:n, s:n, s:n}", "version", TRAIND_VERSION, "cuda", "cublas",
                            "driver"));
}

static int is_json_type(const char *ct)
{
    /* application/json, application/json; charset=utf-8, application/merge+json, text/json */
    if (!ct)
        return 0;
    size_t n = strcspn(ct, ";");
    for (size_t i = 0; i + 4 <= n; i++)
        if (strncasecmp(ct + i, "json", 4) == 0)
            return 1;
    return 0;
}

static void post_jobs(const struct api_ctx *ctx, const struct api_request *req,
                      struct api_response *resp)
{
    if (!is_json_type(req->content_type)) {
        api_error(resp, 415, "unsupported_media_type",
                  "send the job spec as JSON with 'Content-Type: application/json' (got %s)",
                  req->content_type ? "another type" : "none");
        return;
    }
    json_error_t jerr;
    json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        api_error(resp, 400, "invalid_json", "the body is not valid JSON: %s at line %d, column %d",
                  jerr.text, jerr.line, jerr.column);
        json_t *eo = json_object_get(resp->body, "error");
        json_object_set_new(eo, "line", json_integer(jerr.line));
        json_object_set_new(eo, "column", json_integer(jerr.column));
        return;
    }
    struct job_spec *spec;
    struct spec_error se;
    int rc = spec_parse(root, &spec, &se);
    json_decref(root);
    if (rc) {
        api_error(resp, 400, "invalid_spec", "%s%s%s", se.field, se.field[0] ? ": " : "", se.message);
        json_object_set_new(json_object_get(resp->body, "error"), "field", json_string(se.field));
        return;
    }
    struct job *j = spec->client_id ? job_registry_find_client_id(ctx->reg, spec->client_id) : NULL;
    if (j) {
        /* Idempotent resubmission: the first job with this client_id stands. */
        spec_free(spec);
        ok(resp, 200, job_to_json(j, 1));
        snprintf(resp->location, sizeof resp->location, "/jobs/%s", job_id(j));
        return;
    }
    struct err e = {0};
    j = job_registry_add(ctx->reg, spec, &e);
    if (!j) {
        api_error(resp, 500, err_code_name(e.code), "%s", e.msg);
        return;
    }
    sched_kick(ctx->sched);
    ok(resp, 201, job_to_json(j, 1));
    snprintf(resp->location, sizeof resp->location, "/jobs/%s", job_id(j));
}

static void get_jobs(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    const char *state = req->query ? req->query(req->qctx, "state") : NULL;
    enum job_state want = JOB_QUEUED;
    if (state && job_state_parse(state, &want)) {
        api_error(resp, 400, "invalid_argument",
                  "state must be queued, running, succeeded, failed or cancelled");
        return;
    }
    long long limit = 100;
    if (query_int(req, "limit", 1, 10000, &limit, resp))
        return;
    json_t *jobs = json_array();
    for (size_t i = job_registry_count(ctx->reg); jobs && i-- > 0 && (long long)json_array_size(jobs) < limit;) {
        const struct job *j = job_registry_at(ctx->reg, i);
        if (!state || job_state(j) == want)
            json_array_append_new(jobs, job_to_json(j, 0));
    }
    ok(resp, 200, jobs ? json_pack("{s:o}", "jobs", jobs) : NULL);
}

static int is_terminal(enum job_state st)
{
    return st == JOB_SUCCEEDED || st == JOB_FAILED || st == JOB_CANCELLED;
}

static void get_metrics(const struct job *j, const struct api_request *req,
                        struct api_response *resp)
{
    long long since = 0, limit = 10000, wait = 0;
    if (query_int(req, "since", 0, INT64_MAX, &since, resp) ||
        query_int(req, "limit", 1, 100000, &limit, resp) ||
        query_int(req, "wait", 0, API_MAX_WAIT_S, &wait, resp))
        return;
    /* Nothing new yet and more may come: let the server park the request. */
    if (wait > 0 && !req->no_wait && job_iterations_done(j) <= since && !is_terminal(job_state(j))) {
        resp->wait_ms = (unsigned)wait * 1000u;
        snprintf(resp->wait_job, sizeof resp->wait_job, "%s", job_id(j));
        return;
    }
    ok(resp, 200, job_metrics_to_json(j, since, limit));
}

static void post_cancel(const struct api_ctx *ctx, struct job *j, struct api_response *resp)
{
    if (sched_cancel(ctx->sched, j)) {
        api_error(resp, 409, "conflict", "job %s is already %s", job_id(j),
                  job_state_name(job_state(j)));
        return;
    }
    ok(resp, 202, job_to_json(j, 0));
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

void api_route(const struct api_ctx *ctx, const struct api_request *req, struct api_response *resp)
{
    memset(resp, 0, sizeof *resp);
    const char *path = req->path;
    if (strcmp(path, "/healthz") == 0) {
        if (method_is(req, "GET") || method_is(req, "HEAD"))
            get_healthz(resp);
        else
            not_allowed(req, resp, "GET, HEAD");
        return;
    }
    if (strcmp(path, "/version") == 0) {
        if (method_is(req, "GET") || method_is(req, "HEAD"))
            get_version(resp);
        else
            not_allowed(req, resp, "GET, HEAD");
        return;
    }
    if (strcmp(path, "/jobs") == 0) {
        if (method_is(req, "POST"))
            post_jobs(ctx, req, resp);
        else if (method_is(req, "GET") || method_is(req, "HEAD"))
            get_jobs(ctx, req, resp);
        else
            not_allowed(req, resp, "GET, HEAD, POST");
        return;
    }
    char id[64];
    const char *rest;
    if (split_job_path(path, id, sizeof id, &rest) == 0) {
        static const char *const known[] = {"", "/metrics", "/cancel", NULL};
        int k = 0;
        while (known[k] && strcmp(rest, known[k]) != 0)
            k++;
        if (!known[k]) {
            api_error(resp, 404, "not_found", "no such resource: %s", path);
            return;
        }
        static const char *const allows[] = {"GET, HEAD, DELETE", "GET, HEAD", "POST"};
        int is_get = method_is(req, "GET") || method_is(req, "HEAD");
        int allowed = k == 2 ? method_is(req, "POST") : is_get || (k == 0 && method_is(req, "DELETE"));
        if (!allowed) {
            not_allowed(req, resp, allows[k]);
            return;
        }
        struct job *j = job_registry_find(ctx->reg, id);
        if (!j) {
            api_error(resp, 404, "not_found", "no job with id '%s'", id);
            return;
        }
        if (k == 0 && !is_get)
            delete_job(ctx, j, resp);
        else if (k == 0)
            ok(resp, 200, job_to_json(j, 1));
        else if (k == 1)
            get_metrics(j, req, resp);
        else
            post_cancel(ctx, j, resp);
        return;
    }
    api_error(resp, 404, "not_found", "no such resource: %s", path);
}
