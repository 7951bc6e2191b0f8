/* job_json.c — jobs and their metrics as the API's JSON (DESIGN.md §4), with downsampling. */
#include "job_impl.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/*
 * The latest row, but with the latest evaluation's loss (and the iteration it followed, or
 * null), since evaluations are rarer than rows and the one after the last row may not have run.
 */
static json_t *last_metrics_json(const struct job *j, const struct metrics_row *last)
{
    json_t *o = row_object(last);
    double loss;
    int64_t it = job_last_eval(j, &loss);
    if (o) {
        json_object_set_new(o, "eval_loss", it >= 0 ? real_json(loss) : json_null());
        json_object_set_new(o, "eval_iteration", it >= 0 ? json_integer((json_int_t)it) : json_null());
    }
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

/* Seconds left at this run's pace; null when not running or no step is done in this run. */
static json_t *eta_json(const struct job *j)
{
    int64_t done = j->iterations_done - j->run_it0;
    if (j->state != JOB_RUNNING || done <= 0)
        return json_null();
    double per = (job_mono_now() - j->run_t0) / (double)done;
    return json_real(per * (double)(j->spec->iterations - j->iterations_done));
}

json_t *job_to_json(const struct job *j, int with_detail)
{
    const struct job_spec *s = j->spec;
    double fraction = (double)j->iterations_done / (double)s->iterations;
    json_t *o = json_pack("{s:s, s:o, s:o, s:s, s:i, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:f}}",
                          "id", j->id,
                          "name", s->name ? json_string(s->name) : json_null(),
                          "client_id", s->client_id ? json_string(s->client_id) : json_null(),
                          "state", job_state_name(j->state),
                          "priority", s->priority,
                          "device", j->device[0] ? json_string(j->device) : json_null(),
                          "created_at", time_json(j->created_at),
                          "started_at", time_json(j->started_at),
                          "finished_at", time_json(j->finished_at),
                          "progress", "iteration", (json_int_t)j->iterations_done,
                          "iterations", (json_int_t)s->iterations, "fraction", fraction);
    if (!o)
        return NULL;
    json_object_set_new(json_object_get(o, "progress"), "eta_s", eta_json(j));
    const struct metrics_row *last = job_last_metrics(j);
    json_object_set_new(o, "metrics", last ? last_metrics_json(j, last) : json_null());
    uint64_t epoch = 0;
    int64_t ck = job_latest_checkpoint(j, &epoch, NULL);
    json_object_set_new(o, "checkpoint",
                        ck < 0 ? json_null()
                               : json_pack("{s:I, s:I}", "iteration", (json_int_t)ck, "epoch",
                                           (json_int_t)epoch));
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

/* Appends rows[i] for each index in idx[0..n), skipping repeats (idx is sorted). */
static void append_picked(json_t *rows, const struct metrics_row *all, const size_t *idx, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (k == 0 || idx[k] != idx[k - 1])
            json_array_append_new(rows, row_values(&all[idx[k]]));
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * rows[lo, hi) cut into buckets; each keeps its first, last, lowest-loss and highest-loss
 * row, so a plot of the thinned history still shows every spike. With evals (the job has
 * data.test), each also keeps its latest row with an eval_loss, in fewer buckets.
 */
static void downsample(json_t *out, const struct metrics_row *rows, size_t lo, size_t hi,
                       int64_t max_points, bool evals)
{
    size_t per = evals && max_points >= 5 ? 5 : 4;
    size_t buckets = max_points >= 4 ? (size_t)max_points / per : 1;   /* callers ask for >= 4 */
    size_t n = hi - lo;
    for (size_t b = 0; b < buckets; b++) {
        size_t s = lo + n * b / buckets, e = lo + n * (b + 1) / buckets;
        if (s >= e)
            continue;
        size_t pick[5] = {s, e - 1, s, s, s};
        for (size_t i = s; i < e; i++) {
            double l = rows[i].v[METRIC_LOSS];
            if (isnan(rows[pick[2]].v[METRIC_LOSS]) || l < rows[pick[2]].v[METRIC_LOSS])
                pick[2] = i;
            if (isnan(rows[pick[3]].v[METRIC_LOSS]) || l > rows[pick[3]].v[METRIC_LOSS])
                pick[3] = i;
            if (!isnan(rows[i].v[METRIC_EVAL_LOSS]))
                pick[4] = i;
        }
        qsort(pick, per, sizeof *pick, cmp_size);
        append_picked(out, rows, pick, per);
    }
}

json_t *job_metrics_to_json(const struct job *j, int64_t since, int64_t limit, int64_t max_points)
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
    /* Iterations are appended in order, so the rows are sorted by iteration: bisect. */
    size_t lo = 0, top = j->n_rows;
    while (lo < top) {
        size_t mid = lo + (top - lo) / 2;
        if ((int64_t)j->rows[mid].v[METRIC_ITERATION] < since)
            lo = mid + 1;
        else
            top = mid;
    }
    size_t hi = lo + (size_t)limit < j->n_rows && limit >= 0 ? lo + (size_t)limit : j->n_rows;
    int64_t next = hi > lo ? (int64_t)j->rows[hi - 1].v[METRIC_ITERATION] + 1 : since;
    if (max_points > 0 && (int64_t)(hi - lo) > max_points)
        downsample(rows, j->rows, lo, hi, max_points, j->spec->data.test != NULL);
    else
        for (size_t i = lo; i < hi; i++)
            json_array_append_new(rows, row_values(&j->rows[i]));
    json_object_set_new(o, "columns", cols);
    json_object_set_new(o, "rows", rows);
    json_object_set_new(o, "next_since", json_integer((json_int_t)next));
    return o;
}
