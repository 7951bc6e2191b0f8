/* job.c — the job registry and job state changes; every change is reported to one observer (db.c). */
#include "job_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

const char *const job_metric_columns[METRIC_NCOLS] = {
    "iteration", "time", "loss", "seconds_per_iteration",
    "samples_per_second", "data_wait_seconds", "grad_norm", "lr", "eval_loss",
};

static const char *const state_names[] = {"queued", "running", "paused", "succeeded", "failed",
                                          "cancelled"};

struct job_registry {
    struct job **jobs;   /* submission order */
    size_t n, cap;
    job_observer_fn observer;
    void *observer_ctx;
};

double job_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double job_mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
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

int job_is_terminal(enum job_state s)
{
    return s == JOB_SUCCEEDED || s == JOB_FAILED || s == JOB_CANCELLED;
}

static void tell(struct job *j, enum job_event ev, const struct metrics_row *row)
{
    if (j->reg && j->reg->observer)
        j->reg->observer(j->reg->observer_ctx, ev, j, row);
}

static void job_free(struct job *j)
{
    if (!j)
        return;
    spec_free(j->spec);
    free(j->rows);
    free(j->spans);
    free(j->text);
    job_params_free(j->params);
    free(j->ckpt.path);
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

void job_registry_set_observer(struct job_registry *r, job_observer_fn fn, void *ctx)
{
    r->observer = fn;
    r->observer_ctx = ctx;
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

/* A zeroed job in the next slot of r (not yet counted); NULL on out of memory. */
static struct job *alloc_job(struct job_registry *r, struct err *e)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        struct job **jobs = realloc(r->jobs, cap * sizeof *jobs);
        if (!jobs) {
            err_set(e, ERR_NOMEM, "job registry: out of memory");
            return NULL;
        }
        r->jobs = jobs;
        r->cap = cap;
    }
    struct job *j = calloc(1, sizeof *j);
    if (!j) {
        err_set(e, ERR_NOMEM, "job registry: out of memory");
        return NULL;
    }
    j->reg = r;
    j->keep_every = 1;
    j->eval_it = -1;
    return j;
}

struct job *job_registry_add(struct job_registry *r, struct job_spec *spec, struct err *e)
{
    struct job *j = alloc_job(r, e);
    if (!j) {
        spec_free(spec);
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
    j->created_at = job_now();
    r->jobs[r->n++] = j;
    tell(j, JOB_EV_ADDED, NULL);
    return j;
}

struct job *job_registry_restore(struct job_registry *r, struct job_record *rec, struct err *e)
{
    if (strlen(rec->id) != 16 || job_registry_find(r, rec->id)) {
        spec_free(rec->spec);
        job_params_free(rec->params);
        err_set(e, ERR_INVALID_DATA, "job id '%.32s' is malformed or repeated", rec->id);
        return NULL;
    }
    struct job *j = alloc_job(r, e);
    if (!j) {
        spec_free(rec->spec);
        job_params_free(rec->params);
        return NULL;
    }
    memcpy(j->id, rec->id, 17);
    j->state = rec->state;
    j->spec = rec->spec;
    snprintf(j->device, sizeof j->device, "%s", rec->device ? rec->device : "");
    j->created_at = rec->created_at;
    j->started_at = rec->started_at;
    j->finished_at = rec->finished_at;
    j->iterations_done = rec->iterations_done;
    if (rec->state == JOB_FAILED)
        err_set(&j->error, rec->error_code, "%s", rec->error_message ? rec->error_message : "");
    j->params = rec->params;
    rec->spec = NULL;
    rec->params = NULL;
    r->jobs[r->n++] = j;
    return j;
}

/* A linear scan: fine for the thousands of jobs a box keeps; the database has the index. */
struct job *job_registry_find(const struct job_registry *r, const char *id)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->jobs[i]->id, id) == 0)
            return r->jobs[i];
    return NULL;
}

int job_registry_remove(struct job_registry *r, struct job *j)
{
    if (!job_is_terminal(j->state))
        return -1;
    for (size_t i = 0; i < r->n; i++)
        if (r->jobs[i] == j) {
            tell(j, JOB_EV_REMOVED, NULL);
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
const char *job_device(const struct job *j) { return j->device; }
const struct err *job_error(const struct job *j) { return &j->error; }
const struct job_params *job_params(const struct job *j) { return j->params; }

void job_times(const struct job *j, double *created, double *started, double *finished)
{
    *created = j->created_at;
    *started = j->started_at;
    *finished = j->finished_at;
}

const struct metrics_row *job_last_metrics(const struct job *j)
{
    return j->iterations_done > 0 && j->last.v[METRIC_TIME] > 0 ? &j->last : NULL;
}

int64_t job_last_eval(const struct job *j, double *loss)
{
    *loss = j->eval_it >= 0 ? j->eval_loss : NAN;
    return j->eval_it;
}

void job_mark_running(struct job *j, const char *device)
{
    if (j->state != JOB_QUEUED)
        return;
    j->state = JOB_RUNNING;
    if (j->started_at <= 0)
        j->started_at = job_now();
    j->run_t0 = job_mono_now();
    j->run_it0 = j->iterations_done;
    snprintf(j->device, sizeof j->device, "%s", device);
    tell(j, JOB_EV_CHANGED, NULL);
}

/*
 * Keeps every other kept row, so a long job's history stays bounded and still spans it all;
 * their texts move to a fresh arena in row order. ERR_NOMEM leaves everything as it was.
 */
static int thin_rows(struct job *j, struct err *e)
{
    size_t bytes = 0;
    for (size_t i = 0; i < j->n_rows; i++)
        if ((int64_t)j->rows[i].v[METRIC_ITERATION] % (2 * j->keep_every) == 0)
            bytes += j->spans[i].len;
    char *text = malloc(bytes + JOB_ROW_TEXT_MAX);
    if (!text)
        return err_set(e, ERR_NOMEM, "metrics of job %s: out of memory", j->id);
    size_t out = 0, len = 0;
    for (size_t i = 0; i < j->n_rows; i++) {
        if ((int64_t)j->rows[i].v[METRIC_ITERATION] % (2 * j->keep_every) != 0)
            continue;
        memcpy(text + len, j->text + j->spans[i].off, j->spans[i].len);
        j->spans[out] = (struct job_row_span){.off = len, .len = j->spans[i].len};
        j->rows[out++] = j->rows[i];
        len += j->spans[i].len;
    }
    free(j->text);
    j->text = text;
    j->text_len = len;
    j->text_cap = bytes + JOB_ROW_TEXT_MAX;
    j->n_rows = out;
    j->keep_every *= 2;
    return 0;
}

/* Room for one more kept row and its text; 0, or ERR_NOMEM. */
static int reserve_row(struct job *j, struct err *e)
{
    if (j->n_rows == j->cap_rows) {
        size_t cap = j->cap_rows ? 2 * j->cap_rows : 64;
        struct metrics_row *rows = realloc(j->rows, cap * sizeof *rows);
        if (rows)
            j->rows = rows;
        struct job_row_span *spans = rows ? realloc(j->spans, cap * sizeof *spans) : NULL;
        if (!spans)
            return err_set(e, ERR_NOMEM, "metrics of job %s: out of memory", j->id);
        j->spans = spans;
        j->cap_rows = cap;
    }
    if (j->text_cap - j->text_len < JOB_ROW_TEXT_MAX) {
        size_t cap = j->text_cap ? 2 * j->text_cap : 64 * JOB_ROW_TEXT_MAX;
        char *text = realloc(j->text, cap);
        if (!text)
            return err_set(e, ERR_NOMEM, "metrics of job %s: out of memory", j->id);
        j->text = text;
        j->text_cap = cap;
    }
    return 0;
}

/* Appends without telling anyone; 0, or ERR_NOMEM. */
static int append_row(struct job *j, const struct metrics_row *row, struct err *e)
{
    int64_t it = (int64_t)row->v[METRIC_ITERATION];
    j->last = *row;
    if (!isnan(row->v[METRIC_EVAL_LOSS])) {
        j->eval_it = it;
        j->eval_loss = row->v[METRIC_EVAL_LOSS];
    }
    if (it + 1 > j->iterations_done)
        j->iterations_done = it + 1;
    if (j->n_rows == JOB_METRICS_MAX_ROWS && thin_rows(j, e))
        return e->code;
    if (it % j->keep_every != 0)
        return 0;
    if (reserve_row(j, e))
        return e->code;
    size_t len = job_row_text(row, j->text + j->text_len);
    j->spans[j->n_rows] = (struct job_row_span){.off = j->text_len, .len = len};
    j->text_len += len;
    j->rows[j->n_rows++] = *row;
    return 0;
}

int job_append_metrics(struct job *j, const struct metrics_row *row, struct err *e)
{
    if (job_is_terminal(j->state))
        return 0;
    tell(j, JOB_EV_METRICS, row);   /* persisted even if memory for the copy runs out */
    return append_row(j, row, e);
}

int job_restore_metrics(struct job *j, const struct metrics_row *row, struct err *e)
{
    int64_t done = j->iterations_done;
    int rc = append_row(j, row, e);
    if (j->iterations_done < done)
        j->iterations_done = done;
    return rc;
}

void job_finish(struct job *j, int code, const char *message, struct job_params *params)
{
    if (job_is_terminal(j->state)) {
        job_params_free(params);
        return;
    }
    j->state = code == ERR_OK ? JOB_SUCCEEDED : code == ERR_CANCELLED ? JOB_CANCELLED : JOB_FAILED;
    j->finished_at = job_now();
    if (j->state == JOB_FAILED)
        err_set(&j->error, code, "%s", message ? message : "");
    j->params = params;
    tell(j, JOB_EV_CHANGED, NULL);
}

/* Drops the rows at or past from, so the iterations that will run again are not there twice. */
static void truncate_rows(struct job *j, int64_t from)
{
    while (j->n_rows && (int64_t)j->rows[j->n_rows - 1].v[METRIC_ITERATION] >= from)
        j->n_rows--;
    j->text_len = j->n_rows ? j->spans[j->n_rows - 1].off + j->spans[j->n_rows - 1].len : 0;
    if (j->n_rows)
        j->last = j->rows[j->n_rows - 1];
    else
        memset(&j->last, 0, sizeof j->last);
    /* The latest evaluation still kept (one only in thinned-out rows is forgotten here). */
    j->eval_it = -1;
    for (size_t i = j->n_rows; i-- > 0 && j->eval_it < 0;)
        if (!isnan(j->rows[i].v[METRIC_EVAL_LOSS])) {
            j->eval_it = (int64_t)j->rows[i].v[METRIC_ITERATION];
            j->eval_loss = j->rows[i].v[METRIC_EVAL_LOSS];
        }
    j->iterations_done = from;
    j->epoch_seen = false;   /* the rows that said it are gone: the checkpoint's stands */
    tell(j, JOB_EV_TRUNCATED, NULL);
}

static int park(struct job *j, enum job_state to, int64_t from)
{
    if (job_is_terminal(j->state))
        return -1;
    if (from < 0)
        from = 0;
    if (from < j->iterations_done || j->n_rows)
        truncate_rows(j, from);
    j->state = to;
    j->device[0] = '\0';
    tell(j, JOB_EV_CHANGED, NULL);
    return 0;
}

int job_requeue(struct job *j, int64_t from)
{
    return park(j, JOB_QUEUED, from);
}

int job_pause(struct job *j, int64_t from)
{
    return park(j, JOB_PAUSED, from);
}

int job_resume(struct job *j)
{
    if (j->state != JOB_PAUSED)
        return -1;
    j->state = JOB_QUEUED;
    tell(j, JOB_EV_CHANGED, NULL);
    return 0;
}

int64_t job_latest_checkpoint(const struct job *j, uint64_t *epoch, const char **path)
{
    if (!j->ckpt.path)
        return -1;
    if (epoch)
        *epoch = j->ckpt.epoch;
    if (path)
        *path = j->ckpt.path;
    return j->ckpt.iterations;
}

int job_restore_checkpoint(struct job *j, int64_t iteration, uint64_t epoch, const char *path,
                           struct err *e)
{
    char *p = strdup(path);
    if (!p)
        return err_set(e, ERR_NOMEM, "checkpoint of job %s: out of memory", j->id);
    free(j->ckpt.path);
    j->ckpt = (struct job_checkpoint){.iterations = iteration, .epoch = epoch, .path = p};
    return 0;
}

int job_add_checkpoint(struct job *j, int64_t iterations, uint64_t epoch, const char *path,
                       struct err *e)
{
    if (job_restore_checkpoint(j, iterations, epoch, path, e))
        return e->code;
    tell(j, JOB_EV_CHECKPOINT, NULL);
    return 0;
}

void job_set_progress(struct job *j, uint64_t epoch, int64_t planned)
{
    j->epoch = epoch;
    j->epoch_seen = true;
    if (planned > 0)
        j->iterations_planned = planned;
}

int64_t job_iterations_planned(const struct job *j)
{
    if (j->spec->iterations)
        return j->spec->iterations;
    if (j->state == JOB_SUCCEEDED)   /* restored from disk: it did them all */
        return j->iterations_done;
    return j->iterations_planned;
}

uint64_t job_epoch(const struct job *j)
{
    if (j->epoch_seen)
        return j->epoch;
    return j->ckpt.path ? j->ckpt.epoch : 0;
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
