/* jobs.h — steps the integration tests share: submit a job, wait for it, read its metrics. */
#ifndef TRAIND_TESTS_JOBS_H
#define TRAIND_TESTS_JOBS_H

#include <stddef.h>

#include <jansson.h>

#include "client.h"

/* The reference's DC-taxi baseline (seed 0) on train, as a JSON spec (a static buffer). */
const char *baseline_spec(const char *train, int iterations, int batch);
/* spec (an object's JSON) with one more member, e.g. "\"checkpoint_every\":100" (a static buffer). */
const char *spec_with(const char *spec, const char *member);
/* spec, which begins {"data":{, with one more member of data, e.g. "\"test\":\"...\"" (a static buffer). */
const char *spec_with_data(const char *spec, const char *member);
/* POSTs spec, asserts 201, and copies the new job's id into id. */
void submit_job(const struct daemon_proc *d, const char *spec, char *id, size_t cap);
/* Polls GET /jobs/{id} until a terminal state; the job object (caller decrefs). */
json_t *wait_job_done(const struct daemon_proc *d, const char *id, double timeout_s);
/* Waits for job id to end and asserts it failed with error code code; its message (caller frees). */
char *job_failure(const struct daemon_proc *d, const char *id, const char *code, double timeout_s);
/* A new folder name in d's scratch folder with one partition, part-00000.csv, holding text;
 * the folder's path in dir. */
void write_partition(const struct daemon_proc *d, const char *name, const char *text, char *dir,
                     size_t cap);
/* Polls until the job has done at least iterations iterations. */
void wait_job_iterations(const struct daemon_proc *d, const char *id, long long iterations);
/* Polls until the job is in state (a name). */
void wait_job_state(const struct daemon_proc *d, const char *id, const char *state, double timeout_s);
/* POST /jobs/{id}/{action} (pause, resume, cancel) answers status. */
void job_action(const struct daemon_proc *d, const char *id, const char *action, long status);
/* GET path, asserting the status; the parsed body (caller decrefs). */
json_t *get_json(const struct daemon_proc *d, const char *path, long status);
/* A suite's teardown: SIGTERM, and the test fails unless traind exits 0 (so its leaks and
 * sanitizer reports fail the test, with its log shown); then the scratch directory goes. */
void daemon_stop_clean(struct daemon_proc *d);
/* Job id's column name into out (NaN where a row has null), asserting it has n metrics rows,
 * iterations 0 .. n-1 once each in order. */
void job_column(const struct daemon_proc *d, const char *id, const char *name, double *out, size_t n);
/* Trains spec, asserting it succeeds, and reads its column name into out as job_column does. */
void succeeded_column(const struct daemon_proc *d, const char *spec, const char *name, double *out, size_t n);
/* Job id's loss column into loss, asserting it has n metrics rows, iterations 0 .. n-1 once each in order. */
void job_losses(const struct daemon_proc *d, const char *id, double *loss, size_t n);
/* Expects each of n losses of a gradient all-reduced in buckets to equal, bit for bit, the losses of it whole. */
void expect_bucketed_as_whole(const double *bucketed, const double *whole, size_t n);
/* Copies make_eval_fixture.py's CSV name (next to $TRAIND_EVAL_TORCH) into d's scratch folder,
 * which traind may read. */
void copy_eval_fixture(const struct daemon_proc *d, const char *name);
/* The index of column name in a metrics reply's "columns" (fails the test if it has none). */
size_t metrics_column(json_t *metrics, const char *name);
/* error.code of a reply, or NULL. */
const char *reply_error_code(const struct http_reply *r);

/* A .safetensors file's JSON header (caller decrefs); *data is where its tensors begin. */
json_t *safetensors_header(const char *body, size_t len, const char **data);

#endif
