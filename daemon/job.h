/* job.h — jobs and the registry that holds them; owned by the loop thread, nothing here is locked. */
#ifndef TRAIND_DAEMON_JOB_H
#define TRAIND_DAEMON_JOB_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "err.h"
#include "spec.h"

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_SUCCEEDED, JOB_FAILED, JOB_CANCELLED };

/* Metric columns, in the order of DESIGN.md §4 and of every metrics row. */
enum metrics_col {
    METRIC_ITERATION, METRIC_TIME, METRIC_LOSS, METRIC_SECONDS_PER_ITERATION,
    METRIC_SAMPLES_PER_SECOND, METRIC_DATA_WAIT_SECONDS, METRIC_GRAD_NORM, METRIC_LR,
    METRIC_NCOLS
};

extern const char *const job_metric_columns[METRIC_NCOLS];

struct metrics_row {
    double v[METRIC_NCOLS]; /* v[METRIC_ITERATION] holds an integer; time is Unix seconds */
};

/* Final parameters of a model, copied to the host: one 2-D (or 1-D, cols 0) array each. */
struct job_param {
    char name[32];
    int64_t rows, cols;
    double *values;
};

struct job_params {
    int n;
    struct job_param *p;
};

void job_params_free(struct job_params *ps);

/*
 * Metrics are kept in memory for now (SQLite later): past this many rows a job keeps
 * every 2nd, then every 4th, ... iteration, so its history stays bounded (64 MiB).
 */
#define JOB_METRICS_MAX_ROWS ((size_t)1 << 20)

/* Parameters are shown in GET /jobs/{id} only for models this small. */
#define JOB_PARAMS_SHOW_MAX 4096

struct job;
struct job_registry;

const char *job_state_name(enum job_state s);
/* The API's error.code for a failed job's struct err code. */
const char *job_error_code_name(int code);
int job_state_parse(const char *name, enum job_state *out); /* 0, or -1 for no such state */

struct job_registry *job_registry_new(struct err *e);
void job_registry_free(struct job_registry *r);

/*
 * A new queued job with a fresh random id; takes ownership of spec.
 * On failure spec is freed too.
 */
struct job *job_registry_add(struct job_registry *r, struct job_spec *spec, struct err *e);
struct job *job_registry_find(const struct job_registry *r, const char *id);
/* Frees a job and its metrics. Terminal jobs only (nothing else may point at it): -1 otherwise. */
int job_registry_remove(struct job_registry *r, struct job *j);
struct job *job_registry_find_client_id(const struct job_registry *r, const char *client_id);
size_t job_registry_count(const struct job_registry *r);
/* i-th job in submission order (0 = oldest). */
struct job *job_registry_at(const struct job_registry *r, size_t i);

/* The queued job that runs next: highest priority, then oldest. NULL when none. */
struct job *job_registry_next_queued(const struct job_registry *r);

const char *job_id(const struct job *j);
enum job_state job_state(const struct job *j);
const struct job_spec *job_spec(const struct job *j);
int64_t job_iterations_done(const struct job *j);

/* State changes; terminal states never change again (calls on them are ignored). */
void job_mark_running(struct job *j, const char *device);
int job_append_metrics(struct job *j, const struct metrics_row *row, struct err *e);
/* Takes ownership of params (may be NULL). code ERR_OK: succeeded; ERR_CANCELLED: cancelled. */
void job_finish(struct job *j, int code, const char *message, struct job_params *params);

/* Test hook: set the clock-derived fields, so rendering is predictable. */
void job_set_times(struct job *j, double created, double started, double finished);

/*
 * The job object of the API (GET /jobs/{id}); with_detail adds the spec and the
 * final parameters, which the list leaves out.
 */
json_t *job_to_json(const struct job *j, int with_detail);

/* {"columns":[...],"rows":[[...]],"next_since":N}: rows with iteration >= since, at most limit. */
json_t *job_metrics_to_json(const struct job *j, int64_t since, int64_t limit);

double job_now(void); /* Unix seconds, sub-second resolution */

#endif
