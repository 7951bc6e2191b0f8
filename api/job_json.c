/* job_json.c — jobs as the API's JSON. */
#include "job_json.h"

#include <math.h>
#include <stdio.h>
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
    double t0;
    int64_t it = job_iterations_done(j), done = it - job_run_start(j, &t0);
    if (job_state(j) != JOB_RUNNING || done <= 0)
        return json_null();
    double per = (job_mono_now() - t0) / (double)done;
    int64_t planned = job_iterations_planned(j);
    if (planned <= 0)
        return json_null();
    return json_real(per * (double)(planned - it));
}

/* iteration, iterations, epoch, epochs, fraction, eta_s; totals null while an epochs job's are unknown. */
static json_t *progress_json(const struct job *j)
{
    int64_t planned = job_iterations_planned(j), it = job_iterations_done(j);
    const struct job_spec *s = job_spec(j);
    return json_pack("{s:I, s:o, s:I, s:o, s:o, s:o}",
                     "iteration", (json_int_t)it,
                     "iterations", planned > 0 ? json_integer((json_int_t)planned) : json_null(),
                     "epoch", (json_int_t)job_epoch(j),
                     "epochs", s->epochs ? json_integer((json_int_t)s->epochs) : json_null(),
                     "fraction", planned > 0 ? json_real((double)it / (double)planned) : json_null(),
                     "eta_s", eta_json(j));
}

/* An unreadable row's spec as it was stored: its JSON when it parses, else the text itself. */
static json_t *raw_spec_json(const char *text)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    return v ? v : json_string(text);
}

json_t *api_job_json(const struct job *j, int with_detail)
{
    const struct job_spec *s = job_spec(j);
    double created, started, finished;
    job_times(j, &created, &started, &finished);
    const char *device = job_device(j);
    json_t *o = json_pack("{s:s, s:o, s:o, s:s, s:i, s:o, s:o, s:o, s:o, s:o}",
                          "id", job_id(j),
                          "name", s->name ? json_string(s->name) : json_null(),
                          "client_id", s->client_id ? json_string(s->client_id) : json_null(),
                          "state", job_state_name(job_state(j)),
                          "priority", s->priority,
                          "device", device[0] ? json_string(device) : json_null(),
                          "created_at", time_json(created),
                          "started_at", time_json(started),
                          "finished_at", time_json(finished),
                          "progress", progress_json(j));
    if (!o)
        return NULL;
    const struct metrics_row *last = job_last_metrics(j);
    json_object_set_new(o, "metrics", last ? last_metrics_json(j, last) : json_null());
    uint64_t epoch = 0;
    int64_t ck = job_latest_checkpoint(j, &epoch, NULL);
    json_object_set_new(o, "checkpoint",
                        ck < 0 ? json_null()
                               : json_pack("{s:I, s:I}", "iteration", (json_int_t)ck, "epoch",
                                           (json_int_t)epoch));
    const char *raw = job_raw_spec(j);
    const struct err *err = job_error(j);
    const char *code = raw ? "unreadable_spec" : job_error_code_name(err->code);
    json_object_set_new(o, "error",
                        job_state(j) == JOB_FAILED
                            ? json_pack("{s:s, s:s}", "code", code, "message", err->msg)
                            : json_null());
    const json_t *warnings = job_warnings(j);
    json_object_set_new(o, "warnings", warnings ? json_deep_copy(warnings) : json_array());
    if (with_detail) {
        const struct job_params *ps = job_params(j);
        json_object_set_new(o, "spec", raw ? raw_spec_json(raw) : spec_to_json(s));
        json_object_set_new(o, "parameters", ps ? params_json(ps) : json_null());
        uint64_t fetched, total;
        json_object_set_new(o, "data",
                            job_data_bytes(j, &fetched, &total)
                                ? json_pack("{s:I, s:I}", "bytes_fetched", (json_int_t)fetched, "bytes_total",
                                            (json_int_t)total)
                                : json_null());
    }
    return o;
}
