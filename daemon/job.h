/* job.h — jobs and the registry that holds them; owned by the loop thread, nothing here is locked. */
#ifndef TRAIND_DAEMON_JOB_H
#define TRAIND_DAEMON_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "err.h"
#include "metrics.h"
#include "spec.h"

/* JOB_PAUSED sits between the live and the terminal states: job_state_parse walks them in order. */
enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_PAUSED, JOB_SUCCEEDED, JOB_FAILED, JOB_CANCELLED };

/* What happened to a job, for the registry's observer (persistence listens here). */
enum job_event {
    JOB_EV_ADDED,        /* a new job (not for jobs restored from disk) */
    JOB_EV_CHANGED,      /* state, device, times, error or parameters */
    JOB_EV_METRICS,      /* a metrics row was appended (row is set) */
    JOB_EV_TRUNCATED,    /* rows at or past job_iterations_done were dropped */
    JOB_EV_CHECKPOINT,   /* a checkpoint was recorded (job_latest_checkpoint) */
    JOB_EV_REMOVED,      /* about to be freed */
};

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

/*
 * Called synchronously on every change, on the thread that owns the registry. One
 * observer; NULL removes it. row is set for JOB_EV_METRICS only. It returns 0, or an error
 * in e: a new job it could not record is not added (job_registry_add fails with that error);
 * for other events the observer keeps the change and records it later.
 */
typedef int (*job_observer_fn)(void *ctx, enum job_event ev, const struct job *j,
                               const struct metrics_row *row, struct err *e);
void job_registry_set_observer(struct job_registry *r, job_observer_fn fn, void *ctx);

/* Everything persisted about a job, to rebuild it after a restart (db.c). */
struct job_record {
    const char *id;
    enum job_state state;
    struct job_spec *spec;            /* owned by the job afterwards (freed on failure) */
    const char *device;               /* may be NULL */
    double created_at, started_at, finished_at;
    int64_t iterations_done;
    int error_code;                   /* ERR_OK unless failed */
    const char *error_message;
    struct job_params *params;        /* owned by the job afterwards; may be NULL */
    const char *warnings;             /* JSON array (job_warnings); NULL: none */
};

/* Appends a job as it was (no observer call); its latest rows follow with job_restore_rows. */
struct job *job_registry_restore(struct job_registry *r, struct job_record *rec, struct err *e);
/*
 * What a restored job shows of its history: its latest row (NULL: none), the row before its
 * latest checkpoint (NULL: none or unknown), and its latest evaluation (eval_it -1: none).
 */
void job_restore_rows(struct job *j, const struct metrics_row *last,
                      const struct metrics_row *at_checkpoint, int64_t eval_it, double eval_loss);

/*
 * A row that this build's state database could not read (a corrupt spec, or one written by a
 * newer traind): listed as failed with error.code "unreadable_spec" and the stored text, so
 * its client_id stays bound to it and nothing the user submitted is hidden. Never run.
 */
struct job *job_registry_restore_unreadable(struct job_registry *r, const char *id,
                                            const char *client_id, const char *name,
                                            const char *raw_spec, double created_at,
                                            const char *why, struct err *e);
/* Whether j is such a row. */
bool job_unreadable(const struct job *j);
/* Records a checkpoint as it was (no observer call). */
int job_restore_checkpoint(struct job *j, int64_t iteration, uint64_t epoch, const char *path,
                           struct err *e);
/* Frees a job and its metrics. Terminal jobs only (nothing else may point at it): -1 otherwise. */
int job_registry_remove(struct job_registry *r, struct job *j);
struct job *job_registry_find_client_id(const struct job_registry *r, const char *client_id);
size_t job_registry_count(const struct job_registry *r);
/* i-th job in submission order (0 = oldest). */
struct job *job_registry_at(const struct job_registry *r, size_t i);

/*
 * The queued jobs in the order they run, highest priority, then oldest (submission order): the
 * first, and the one after j (queued). O(1) each, from an index kept on every state change.
 * NULL past the end.
 */
struct job *job_registry_next_queued(const struct job_registry *r);
struct job *job_registry_queued_after(const struct job_registry *r, const struct job *j);
/* Does a run before b in the queue's order? */
bool job_runs_before(const struct job *a, const struct job *b);
/* How many times a job entered the queue: unchanged means no job was queued since. */
uint64_t job_registry_queued_gen(const struct job_registry *r);
/*
 * The queued jobs that entered the queue after generation gen (a job_registry_queued_gen
 * value), newest first: the first, and the one after j. O(1) each; NULL past the last.
 */
struct job *job_registry_queued_since(const struct job_registry *r, uint64_t gen);
struct job *job_registry_queued_since_next(const struct job_registry *r, const struct job *j,
                                           uint64_t gen);

const char *job_id(const struct job *j);
enum job_state job_state(const struct job *j);
const struct job_spec *job_spec(const struct job *j);
int64_t job_iterations_done(const struct job *j);
const char *job_device(const struct job *j);                 /* "" when never run */
void job_times(const struct job *j, double *created, double *started, double *finished);
const struct err *job_error(const struct job *j);            /* code ERR_OK unless failed */
const struct job_params *job_params(const struct job *j);    /* NULL unless succeeded */
/* An unreadable row's spec as it was stored (job_unreadable); NULL for every other job. */
const char *job_raw_spec(const struct job *j);
/*
 * The current run (since the job last went to running): the iterations done when it started,
 * and in *t0 when it started on job_mono_now's clock. Its pace gives GET /jobs/{id}'s eta_s.
 */
int64_t job_run_start(const struct job *j, double *t0);
int job_is_terminal(enum job_state s);

/* The latest checkpoint: its iteration (iterations done when it was taken) and file; -1 when none. */
int64_t job_latest_checkpoint(const struct job *j, uint64_t *epoch, const char **path);
/* A checkpoint taken after iteration iterations (so resuming starts there). */
int job_add_checkpoint(struct job *j, int64_t iterations, uint64_t epoch, const char *path,
                       struct err *e);

/*
 * What the runner knows with a metrics row: the data cursor's epoch after it, and the
 * iterations the job does in all (an epochs job's once the data's size is known; 0: not yet).
 */
void job_set_progress(struct job *j, uint64_t epoch, int64_t planned);
/* The iterations the job does in all: the spec's, an epochs job's once known, or 0 (unknown). */
int64_t job_iterations_planned(const struct job *j);
/* The data cursor's epoch (epochs completed): after the latest row, or at the latest checkpoint. */
uint64_t job_epoch(const struct job *j);
/* The training data its latest run read so far and the data's size, from its latest metrics row
   (kept in the state database); false before one. */
void job_set_data_bytes(struct job *j, uint64_t fetched, uint64_t total);
bool job_data_bytes(const struct job *j, uint64_t *fetched, uint64_t *total);

/* State changes; terminal states never change again (calls on them are ignored). */
void job_mark_running(struct job *j, const char *device);
int job_append_metrics(struct job *j, const struct metrics_row *row, struct err *e);
/* Takes ownership of params (may be NULL). code ERR_OK: succeeded; ERR_CANCELLED: cancelled. */
void job_finish(struct job *j, int code, const char *message, struct job_params *params);

/*
 * Back to queued (a daemon stopping, or a crash found at start) or to paused, to go on
 * from iteration from (its latest checkpoint, or 0): metrics rows at or past from are
 * dropped so the history stays monotonic. Live (non-terminal) jobs only; -1 otherwise.
 */
int job_requeue(struct job *j, int64_t from);
int job_pause(struct job *j, int64_t from);
/* paused -> queued; -1 for any other state. */
int job_resume(struct job *j);

/*
 * What went wrong without failing the job, a JSON array (borrowed; NULL when none) of objects
 * with a "kind". Kept across runs and restarts. Kinds:
 *   "straggler": {"replica", "host", "device", "ratio", "since_iteration"}: replica's steps
 *   took ratio times its peers' (replica.h's REPLICA_STRAGGLER_*), first seen when the job had
 *   done since_iteration iterations; ratio is the highest seen since (to a tenth).
 */
const json_t *job_warnings(const struct job *j);
/*
 * Replica `replica` is a straggler (on device of host) at ratio: a warning is added for it, or
 * the one it has gets a ratio a tenth higher or more. True (and JOB_EV_CHANGED) when the record changed: a
 * new warning, or a higher ratio (only a tenth or more, so a record is not rewritten at every check).
 */
bool job_warn_straggler(struct job *j, int replica, const char *host, const char *device, double ratio);

/* Test hook: set the clock-derived fields, so rendering is predictable. */
void job_set_times(struct job *j, double created, double started, double finished);

/*
 * What the history keeps of a row (job_append_metrics applies it): time to the microsecond,
 * seconds_per_iteration, samples_per_second and data_wait_seconds to float32 (timings, as
 * TensorBoard keeps every scalar); loss, grad_norm, lr and eval_loss exactly. So the API shows
 * the same digits before and after a restart.
 */
void job_metrics_round(struct metrics_row *row);

/* The latest metrics row, or NULL before the first step. */
const struct metrics_row *job_last_metrics(const struct job *j);
/* The latest evaluation: the iteration it followed, and its loss in *loss; -1 when none yet. */
int64_t job_last_eval(const struct job *j, double *loss);

double job_now(void); /* Unix seconds, sub-second resolution */
double job_mono_now(void); /* seconds on a monotonic clock, for durations */

#endif
