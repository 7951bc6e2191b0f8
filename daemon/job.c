/* job.c — the job registry and job state changes; every change is reported to one observer (db.c). */
#include "job.h"

#include <math.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "job_queue.h"
#include "log.h"

static const char *const state_names[] = {"queued", "running", "paused", "succeeded", "failed",
                                          "cancelled"};

struct job_checkpoint {
    int64_t iterations;                /* iterations done when it was taken */
    uint64_t epoch;
    char *path;
};

struct job {
    char id[17];
    struct job_registry *reg;
    enum job_state state;
    struct job_spec *spec;
    char device[16];
    double created_at, started_at, finished_at;   /* Unix seconds; 0 = not yet */
    double run_t0;                     /* monotonic start of this run, for eta_s */
    int64_t run_it0;                   /* iterations done when this run started */
    int64_t iterations_done;
    struct err error;
    struct metrics_row last;           /* the latest row */
    struct metrics_row at_ckpt;        /* the row before the latest checkpoint; iteration -1: unknown */
    int64_t eval_it;                   /* the latest row with an eval_loss, kept or not; -1: none */
    double eval_loss;
    int64_t ckpt_eval_it;              /* the latest evaluation when the checkpoint was taken */
    double ckpt_eval_loss;
    char *raw_spec;                    /* an unreadable row's stored spec; spec is then a stand-in */
    struct job_params *params;
    struct job_checkpoint ckpt;        /* the latest; path NULL when none */
    json_t *warnings;                  /* job_warnings; NULL until the first */
    uint64_t epoch;                    /* the data cursor's epoch after the latest row (epoch_seen) */
    bool epoch_seen;                   /* false: the latest checkpoint's (or 0) stands for it */
    uint64_t bytes_fetched, bytes_total; /* job_data_bytes, when bytes_seen */
    bool bytes_seen;
    int64_t iterations_planned;        /* an epochs job's total once the data's size is known; 0 before */
    struct jq_node queued;             /* its place in the registry's queue while JOB_QUEUED */
};

struct job_registry {
    struct job **jobs;   /* submission order */
    size_t n, cap;
    struct job_queue queue;   /* the JOB_QUEUED ones in run order */
    uint64_t next_seq;        /* submission order of the next job */
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

int job_is_terminal(enum job_state s)
{
    return s == JOB_SUCCEEDED || s == JOB_FAILED || s == JOB_CANCELLED;
}

/* The observer keeps what it could not record and records it later (db.c): only an add can fail. */
static int tell_or_fail(struct job *j, enum job_event ev, const struct metrics_row *row, struct err *e)
{
    if (j->reg && j->reg->observer)
        return j->reg->observer(j->reg->observer_ctx, ev, j, row, e);
    return 0;
}

static void tell(struct job *j, enum job_event ev, const struct metrics_row *row)
{
    struct err ignored = {0};
    tell_or_fail(j, ev, row, &ignored);
}

/* Every state change goes through here, so the queue holds exactly the queued jobs. */
static void set_state(struct job *j, enum job_state to)
{
    j->state = to;
    if (to != JOB_QUEUED) {
        jq_remove(&j->reg->queue, &j->queued);
    } else if (!jq_queued(&j->queued)) {
        jq_insert(&j->reg->queue, &j->queued, j->spec->priority, j->queued.seq);
    }
}

static void job_free(struct job *j)
{
    if (!j)
        return;
    jq_remove(&j->reg->queue, &j->queued);
    spec_free(j->spec);
    free(j->raw_spec);
    job_params_free(j->params);
    json_decref(j->warnings);
    free(j->ckpt.path);
    free(j);
}

struct job_registry *job_registry_new(struct err *e)
{
    struct job_registry *r = calloc(1, sizeof *r);
    if (!r)
        err_set(e, ERR_NOMEM, "job registry: out of memory");
    else
        jq_init(&r->queue);
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
    j->queued.seq = r->next_seq++;
    j->eval_it = -1;
    j->ckpt_eval_it = -1;
    j->at_ckpt.v[METRIC_ITERATION] = -1;
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
    set_state(j, JOB_QUEUED);
    j->created_at = job_now();
    r->jobs[r->n++] = j;
    if (tell_or_fail(j, JOB_EV_ADDED, NULL, e)) {
        r->n--;
        job_free(j);
        return NULL;
    }
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
    j->spec = rec->spec;
    set_state(j, rec->state);
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
    if (rec->warnings && !(j->warnings = json_loads(rec->warnings, 0, NULL)))
        log_warn("job %s: its warnings cannot be read; they are dropped", j->id);
    if (j->warnings && !json_is_array(j->warnings)) {
        json_decref(j->warnings);
        j->warnings = NULL;
    }
    r->jobs[r->n++] = j;
    return j;
}

struct job *job_registry_restore_unreadable(struct job_registry *r, const char *id,
                                            const char *client_id, const char *name,
                                            const char *raw_spec, double created_at,
                                            const char *why, struct err *e)
{
    struct job_spec *stand_in = calloc(1, sizeof *stand_in);
    char *raw = strdup(raw_spec ? raw_spec : "");
    if (!stand_in || !raw || (client_id && !(stand_in->client_id = strdup(client_id))) ||
        (name && !(stand_in->name = strdup(name)))) {
        spec_free(stand_in);
        free(raw);
        err_set(e, ERR_NOMEM, "job registry: out of memory");
        return NULL;
    }
    struct job_record rec = {.id = id, .state = JOB_FAILED, .spec = stand_in, .created_at = created_at,
                             .error_code = ERR_INVALID_DATA, .error_message = why};
    struct job *j = job_registry_restore(r, &rec, e);
    if (!j) {
        free(raw);
        return NULL;
    }
    j->raw_spec = raw;
    return j;
}

bool job_unreadable(const struct job *j)
{
    return j->raw_spec != NULL;
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

static struct job *of_node(struct jq_node *x)
{
    return x ? (struct job *)((char *)x - offsetof(struct job, queued)) : NULL;
}

struct job *job_registry_next_queued(const struct job_registry *r)
{
    return of_node(jq_first(&r->queue));
}

struct job *job_registry_queued_after(const struct job_registry *r, const struct job *j)
{
    return of_node(jq_next(&r->queue, &j->queued));
}

bool job_runs_before(const struct job *a, const struct job *b)
{
    if (a->spec->priority != b->spec->priority)
        return a->spec->priority > b->spec->priority;
    return a->queued.seq < b->queued.seq;
}

uint64_t job_registry_queued_gen(const struct job_registry *r)
{
    return r->queue.gen;
}

struct job *job_registry_queued_since(const struct job_registry *r, uint64_t gen)
{
    return of_node(jq_entered_after(&r->queue, gen));
}

struct job *job_registry_queued_since_next(const struct job_registry *r, const struct job *j,
                                           uint64_t gen)
{
    return of_node(jq_entered_before(&r->queue, &j->queued, gen));
}

const char *job_id(const struct job *j) { return j->id; }
enum job_state job_state(const struct job *j) { return j->state; }
const struct job_spec *job_spec(const struct job *j) { return j->spec; }
int64_t job_iterations_done(const struct job *j) { return j->iterations_done; }
const char *job_device(const struct job *j) { return j->device; }
const struct err *job_error(const struct job *j) { return &j->error; }
const struct job_params *job_params(const struct job *j) { return j->params; }
const char *job_raw_spec(const struct job *j) { return j->raw_spec; }

int64_t job_run_start(const struct job *j, double *t0)
{
    *t0 = j->run_t0;
    return j->run_it0;
}

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
    set_state(j, JOB_RUNNING);
    if (j->started_at <= 0)
        j->started_at = job_now();
    j->run_t0 = job_mono_now();
    j->run_it0 = j->iterations_done;
    snprintf(j->device, sizeof j->device, "%s", device);
    tell(j, JOB_EV_CHANGED, NULL);
}

/*
 * x rounded to float32. Through a volatile: GCC 12's SLP vectorizer at -O2 drops two of three
 * neighbouring `v[i] = (float)v[i]` as if they were no-ops.
 */
static double to_float(double x)
{
    volatile float f = (float)x;
    return f;
}

void job_metrics_round(struct metrics_row *row)
{
    double *v = row->v;
    /* Unix seconds to the microsecond; a time the microseconds of which a double cannot hold is 0. */
    double t = v[METRIC_TIME];
    v[METRIC_TIME] = t > 0 && t < 4e9 ? (double)llround(t * 1e6) / 1e6 : 0;
    v[METRIC_SECONDS_PER_ITERATION] = to_float(v[METRIC_SECONDS_PER_ITERATION]);
    v[METRIC_SAMPLES_PER_SECOND] = to_float(v[METRIC_SAMPLES_PER_SECOND]);
    v[METRIC_DATA_WAIT_SECONDS] = to_float(v[METRIC_DATA_WAIT_SECONDS]);
}

int job_append_metrics(struct job *j, const struct metrics_row *row, struct err *e)
{
    (void)e;
    if (job_is_terminal(j->state))
        return 0;
    struct metrics_row r = *row;
    job_metrics_round(&r);
    int64_t it = (int64_t)r.v[METRIC_ITERATION];
    j->last = r;
    if (!isnan(r.v[METRIC_EVAL_LOSS])) {
        j->eval_it = it;
        j->eval_loss = r.v[METRIC_EVAL_LOSS];
    }
    if (it + 1 > j->iterations_done)
        j->iterations_done = it + 1;
    tell(j, JOB_EV_METRICS, &r);
    return 0;
}

void job_restore_rows(struct job *j, const struct metrics_row *last,
                      const struct metrics_row *at_checkpoint, int64_t eval_it, double eval_loss)
{
    if (last) {
        j->last = *last;
        if ((int64_t)last->v[METRIC_ITERATION] + 1 > j->iterations_done)
            j->iterations_done = (int64_t)last->v[METRIC_ITERATION] + 1;
    }
    if (at_checkpoint)
        j->at_ckpt = *at_checkpoint;
    j->eval_it = eval_it;
    j->eval_loss = eval_loss;
    /* An evaluation before the checkpoint is the one it saw (an earlier one is forgotten). */
    if (j->ckpt.path && eval_it >= 0 && eval_it < j->ckpt.iterations) {
        j->ckpt_eval_it = eval_it;
        j->ckpt_eval_loss = eval_loss;
    }
}

void job_finish(struct job *j, int code, const char *message, struct job_params *params)
{
    if (job_is_terminal(j->state)) {
        job_params_free(params);
        return;
    }
    set_state(j, code == ERR_OK ? JOB_SUCCEEDED : code == ERR_CANCELLED ? JOB_CANCELLED : JOB_FAILED);
    j->finished_at = job_now();
    if (j->state == JOB_FAILED)
        err_set(&j->error, code, "%s", message ? message : "");
    j->params = params;
    tell(j, JOB_EV_CHANGED, NULL);
}

/*
 * Forgets the rows at or past from, so the iterations that will run again are not there twice;
 * the history drops them too (JOB_EV_TRUNCATED). The latest row is then the one before the
 * checkpoint the job goes on from, when known.
 */
static void truncate_rows(struct job *j, int64_t from)
{
    if ((int64_t)j->last.v[METRIC_ITERATION] >= from || from == 0) {
        if (from > 0 && (int64_t)j->at_ckpt.v[METRIC_ITERATION] == from - 1)
            j->last = j->at_ckpt;
        else
            memset(&j->last, 0, sizeof j->last);
    }
    if (j->eval_it >= from) {
        bool kept = j->ckpt.path && j->ckpt.iterations == from;
        j->eval_it = kept ? j->ckpt_eval_it : -1;
        j->eval_loss = kept ? j->ckpt_eval_loss : NAN;
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
    if (from < j->iterations_done || job_last_metrics(j))
        truncate_rows(j, from);
    set_state(j, to);
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
    set_state(j, JOB_QUEUED);
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
    /* What the job shows if it goes back to this checkpoint (truncate_rows). */
    j->at_ckpt.v[METRIC_ITERATION] = -1;
    if ((int64_t)j->last.v[METRIC_ITERATION] == iterations - 1 && job_last_metrics(j))
        j->at_ckpt = j->last;
    j->ckpt_eval_it = j->eval_it;
    j->ckpt_eval_loss = j->eval_loss;
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

void job_set_data_bytes(struct job *j, uint64_t fetched, uint64_t total)
{
    j->bytes_fetched = fetched;
    j->bytes_total = total;
    j->bytes_seen = true;
}

bool job_data_bytes(const struct job *j, uint64_t *fetched, uint64_t *total)
{
    *fetched = j->bytes_fetched;
    *total = j->bytes_total;
    return j->bytes_seen;
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
 * A failed job's error.code, from the list in docs/api.md. Two library codes are
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

const json_t *job_warnings(const struct job *j)
{
    return j->warnings && json_array_size(j->warnings) ? j->warnings : NULL;
}

bool job_warn_straggler(struct job *j, int replica, const char *host, const char *device, double ratio)
{
    if (!j->warnings && !(j->warnings = json_array()))
        return false;
    size_t i;
    json_t *w;
    json_array_foreach(j->warnings, i, w) {
        const char *kind = json_string_value(json_object_get(w, "kind"));
        if (!kind || strcmp(kind, "straggler") != 0 ||
            json_integer_value(json_object_get(w, "replica")) != replica)
            continue;
        double had = json_number_value(json_object_get(w, "ratio"));
        if (ratio < 1.1 * had)
            return false;
        json_object_set_new(w, "ratio", json_real(ratio));
        tell(j, JOB_EV_CHANGED, NULL);
        return true;
    }
    w = json_pack("{s:s, s:i, s:s, s:s, s:f, s:I}", "kind", "straggler", "replica", replica, "host", host,
                  "device", device, "ratio", ratio, "since_iteration", (json_int_t)j->iterations_done);
    if (!w || json_array_append_new(j->warnings, w) != 0)
        return false;
    tell(j, JOB_EV_CHANGED, NULL);
    return true;
}
