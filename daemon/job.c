/* job.c — the job registry (in memory; SQLite persistence slots in behind these calls later). */
#include "job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

const char *const job_metric_columns[METRIC_NCOLS] = {
    "iteration", "time", "loss", "seconds_per_iteration",
    "samples_per_second", "data_wait_seconds", "grad_norm", "lr",
};

static const char *const state_names[] = {"queued", "running", "succeeded", "failed", "cancelled"};

struct job {
    char id[17];
    enum job_state state;
    struct job_spec *spec;
    char device[16];
    double created_at, started_at, finished_at;   /* Unix seconds; 0 = not yet */
    int64_t iterations_done;
    struct err error;
    struct metrics_row *rows;          /* every keep_every-th iteration, in order */
    size_t n_rows, cap_rows;
    int64_t keep_every;                /* 1 until a job outgrows JOB_METRICS_MAX_ROWS */
    struct metrics_row last;           /* always the latest row, kept or not */
    struct job_params *params;
};

struct job_registry {
    struct job **jobs;   /* submission order */
    size_t n, cap;
};

double job_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *job_state_name(enum job_state s)
{
    return state_names[s];
}

int job_state_parse(const char *name, enum job_state *out)
{
    for (int i = 0; i <= JOB_CANCELLED; i++)
        if (strcmp(name, state_names[i]) == 0) {
            *out = (enum job_state)i;
            return 0;
        }
    return -1;
}

void job_params_free(struct job_params *ps)
{
    if (!ps)
        return;
    for (int i = 0; i < ps->n; i++)
        free(ps->p[i].values);
    free(ps->p);
    free(ps);
}

static int is_terminal(enum job_state s)
{
    return s == JOB_SUCCEEDED || s == JOB_FAILED || s == JOB_CANCELLED;
}

static void job_free(struct job *j)
{
    if (!j)
        return;
    spec_free(j->spec);
    free(j->rows);
    job_params_free(j->params);
    free(j);
}

struct job_registry *job_registry_new(struct err *e)
{
    struct job_registry *r = calloc(1, sizeof *r);
    if (!r)
        err_set(e, ERR_NOMEM, "job registry: out of memory");
    return r;
}

void job_registry_free(struct job_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        job_free(r->jobs[i]);
    free(r->jobs);
    free(r);
}

/* 64 random bits as 16 hex digits: unguessable enough to not enumerate, short enough to type. */
static int new_id(char out[17], struct err *e)
{
    uint64_t x;
    if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x)
        return err_set(e, ERR_INTERNAL, "getrandom failed");
    snprintf(out, 17, "%016llx", (unsigned long long)x);
    return 0;
}

struct job *job_registry_add(struct job_registry *r, struct job_spec *spec, struct err *e)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        struct job **jobs = realloc(r->jobs, cap * sizeof *jobs);
        if (!jobs) {
            spec_free(spec);
            err_set(e, ERR_NOMEM, "job registry: out of memory");
            return NULL;
        }
        r->jobs = jobs;
        r->cap = cap;
    }
    struct job *j = calloc(1, sizeof *j);
    if (!j) {
        spec_free(spec);
        err_set(e, ERR_NOMEM, "job registry: out of memory");
        return NULL;
    }
    do {
        if (new_id(j->id, e)) {
            job_free(j);
            spec_free(spec);
            return NULL;
        }
    } while (job_registry_find(r, j->id));
    j->spec = spec;
    j->state = JOB_QUEUED;
    j->keep_every = 1;
    j->created_at = job_now();
    r->jobs[r->n++] = j;
    return j;
}

/* A linear scan: fine for the thousands of jobs a box sees; an index comes with SQLite. */
struct job *job_registry_find(const struct job_registry *r, const char *id)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->jobs[i]->id, id) == 0)
            return r->jobs[i];
    return NULL;
}

int job_registry_remove(struct job_registry *r, struct job *j)
{
    if (!is_terminal(j->state))
        return -1;
    for (size_t i = 0; i < r->n; i++)
        if (r->jobs[i] == j) {
            memmove(&r->jobs[i], &r->jobs[i + 1], (r->n - i - 1) * sizeof *r->jobs);
            r->n--;
            job_free(j);
            return 0;
        }
    return -1;
}

struct job *job_registry_find_client_id(const struct job_registry *r, const char *client_id)
{
    for (size_t i = 0; i < r->n; i++) {
        const char *c = r->jobs[i]->spec->client_id;
        if (c && strcmp(c, client_id) == 0)
            return r->jobs[i];
    }
    return NULL;
}

size_t job_registry_count(const struct job_registry *r)
{
    return r->n;
}

struct job *job_registry_at(const struct job_registry *r, size_t i)
{
    return i < r->n ? r->jobs[i] : NULL;
}

struct job *job_registry_next_queued(const struct job_registry *r)
{
    struct job *best = NULL;
    for (size_t i = 0; i < r->n; i++) {
        struct job *j = r->jobs[i];
        if (j->state == JOB_QUEUED && (!best || j->spec->priority > best->spec->priority))
            best = j;
    }
    return best;
}

const char *job_id(const struct job *j) { return j->id; }
enum job_state job_state(const struct job *j) { return j->state; }
const struct job_spec *job_spec(const struct job *j) { return j->spec; }
int64_t job_iterations_done(const struct job *j) { return j->iterations_done; }

void job_mark_running(struct job *j, const char *device)
{
    if (j->state != JOB_QUEUED)
        return;
    j->state = JOB_RUNNING;
    j->started_at = job_now();
    snprintf(j->device, sizeof j->device, "%s", device);
}

/* Keeps every other kept row, so a long job's history stays bounded and still spans it all. */
static void thin_rows(struct job *j)
{
    size_t out = 0;
    for (size_t i = 0; i < j->n_rows; i++)
        if ((int64_t)j->rows[i].v[METRIC_ITERATION] % (2 * j->keep_every) == 0)
            j->rows[out++] = j->rows[i];
    j->n_rows = out;
    j->keep_every *= 2;
}

int job_append_metrics(struct job *j, const struct metrics_row *row, struct err *e)
{
    if (is_terminal(j->state))
        return 0;
    int64_t it = (int64_t)row->v[METRIC_ITERATION];
    j->last = *row;
    j->iterations_done = it + 1;
    if (j->n_rows == JOB_METRICS_MAX_ROWS)
        thin_rows(j);
    if (it % j->keep_every != 0)
        return 0;
    if (j->n_rows == j->cap_rows) {
        size_t cap = j->cap_rows ? 2 * j->cap_rows : 64;
        struct metrics_row *rows = realloc(j->rows, cap * sizeof *rows);
        if (!rows)
            return err_set(e, ERR_NOMEM, "metrics of job %s: out of memory", j->id);
        j->rows = rows;
        j->cap_rows = cap;
    }
    j->rows[j->n_rows++] = *row;
    return 0;
}

void job_finish(struct job *j, int code, const char *message, struct job_params *params)
{
    if (is_terminal(j->state)) {
        job_params_free(params);
        return;
    }
    j->state = code == ERR_OK ? JOB_SUCCEEDED : code == ERR_CANCELLED ? JOB_CANCELLED : JOB_FAILED;
    j->finished_at = job_now();
    if (j->state == JOB_FAILED)
        err_set(&j->error, code, "%s", message ? message : "");
    j->params = params;
}

void job_set_times(struct job *j, double created, double started, double finished)
{
    j->created_at = created;
    j->started_at = started;
    j->finished_at = finished;
}

/*
 * A failed job's error.code, from DESIGN.md §4's list. Two library codes are
 * renamed for users: ERR_INVALID_ARG from storage or core means the spec does
 * not fit the data (a label column past the last one, s3:// before it exists),
 * and ERR_IO means the data could not be read.
 */
const char *job_error_code_name(int code)
{
    switch (code) {
    case ERR_INVALID_ARG: return "invalid_spec";
    case ERR_IO: return "data_unavailable";
    default: return err_code_name(code);
    }
}

/* RFC 3339 in UTC with milliseconds, or null for "not yet". */
static json_t *time_json(double t)
{
    if (t <= 0)
        return json_null();
    time_t sec = (time_t)floor(t);
    int ms = (int)((t - (double)sec) * 1000.0);
    struct tm tm;
    gmtime_r(&sec, &tm);
    char buf[40], out[48];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, sizeof out, "%s.%03dZ", buf, ms);
    return json_string(out);
}

/* A non-finite value (a diverged loss) has no JSON spelling: it becomes null. */
static json_t *real_json(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *row_values(const struct metrics_row *r)
{
    json_t *a = json_array();
    if (!a)
        return NULL;
    json_array_append_new(a, json_integer((json_int_t)r->v[METRIC_ITERATION]));
    for (int c = 1; c < METRIC_NCOLS; c++)
        json_array_append_new(a, real_json(r->v[c]));
    return a;
}

static json_t *row_object(const struct metrics_row *r)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, job_metric_columns[0], json_integer((json_int_t)r->v[METRIC_ITERATION]));
    for (int c = 1; c < METRIC_NCOLS; c++)
        json_object_set_new(o, job_metric_columns[c], real_json(r->v[c]));
    return o;
}

static json_t *params_json(const struct job_params *ps)
{
    int64_t total = 0;
    for (int i = 0; i < ps->n; i++)
        total += ps->p[i].rows * (ps->p[i].cols ? ps->p[i].cols : 1);
    if (total > JOB_PARAMS_SHOW_MAX)
        return json_null();
    json_t *o = json_object();
    for (int i = 0; o && i < ps->n; i++) {
        const struct job_param *p = &ps->p[i];
        json_t *a = json_array();
        for (int64_t r = 0; a && r < p->rows; r++) {
            if (p->cols == 0) {
                json_array_append_new(a, real_json(p->values[r]));
                continue;
            }
            json_t *row = json_array();
            for (int64_t c = 0; row && c < p->cols; c++)
                json_array_append_new(row, real_json(p->values[r * p->cols + c]));
            json_array_append_new(a, row);
        }
        json_object_set_new(o, p->name, a);
    }
    return o;
}

json_t *job_to_json(const struct job *j, int with_detail)
{
    const struct job_spec *s = j->spec;
    double fraction = (double)j->iterations_done / (double)s->iterations;
    json_t *o = json_pack("{s:s, s:o, s:o, s:s, s:i, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:f}}",
                          "id", j->id,
                          "name", s->name ? json_string(s->name) : json_null(),
                          "client_id", s->client_id ? json_string(s->client_id) : json_null(),
                          "state", state_names[j->state],
                          "priority", s->priority,
                          "device", j->device[0] ? json_string(j->device) : json_null(),
                          "created_at", time_json(j->created_at),
                          "started_at", time_json(j->started_at),
                          "finished_at", time_json(j->finished_at),
                          "progress", "iteration", (json_int_t)j->iterations_done,
                          "iterations", (json_int_t)s->iterations, "fraction", fraction);
    if (!o)
        return NULL;
    json_object_set_new(o, "metrics",
                        j->iterations_done ? row_object(&j->last) : json_null());
    json_object_set_new(o, "error",
                        j->state == JOB_FAILED
                            ? json_pack("{s:s, s:s}", "code", job_error_code_name(j->error.code),
                                        "message", j->error.msg)
                            : json_null());
    if (with_detail) {
        json_object_set_new(o, "spec", spec_to_json(s));
        json_object_set_new(o, "parameters", j->params ? params_json(j->params) : json_null());
    }
    return o;
}

json_t *job_metrics_to_json(const struct job *j, int64_t since, int64_t limit)
{
    json_t *cols = json_array();
    json_t *rows = json_array();
    json_t *o = json_object();
    if (!cols || !rows || !o) {
        json_decref(cols);
        json_decref(rows);
        json_decref(o);
        return NULL;
    }
    for (int c = 0; c < METRIC_NCOLS; c++)
        json_array_append_new(cols, json_string(job_metric_columns[c]));
    int64_t next = since;
    /* Iterations are appended in order, so the rows are sorted by iteration. */
    for (size_t i = 0; i < j->n_rows && (int64_t)json_array_size(rows) < limit; i++) {
        int64_t it = (int64_t)j->rows[i].v[METRIC_ITERATION];
        if (it < since)
            continue;
        json_array_append_new(rows, row_values(&j->rows[i]));
        next = it + 1;
    }
    json_object_set_new(o, "columns", cols);
    json_object_set_new(o, "rows", rows);
    json_object_set_new(o, "next_since", json_integer((json_int_t)next));
    return o;
}
