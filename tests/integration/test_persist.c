/* test_persist.c — traind stopped and started again on the same --state-dir: what users saw stays, jobs go on. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"

static struct daemon_proc D;

static void setup(void)
{
    cr_assert(daemon_start(&D), "traind did not start (see its log under /tmp/traind-it-*)");
}

static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(persist, .init = setup, .fini = teardown, .timeout = 240);

/* SIGTERM, a clean exit, and a new traind on the same state directory. */
static void restart(void)
{
    int status = daemon_stop(&D, 30);
    if (status != 0)
        daemon_print_log(&D);
    cr_assert_eq(status, 0, "traind exited with %d on SIGTERM", status);
    cr_assert(daemon_spawn(&D, NULL), "traind did not start again");
}

static json_t *job_and_metrics(const char *id)
{
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *job = get_json(&D, path, 200);
    snprintf(path, sizeof path, "/jobs/%s/metrics", id);
    json_t *m = get_json(&D, path, 200);
    return json_pack("{s:o, s:o}", "job", job, "metrics", m);
}

Test(persist, a_finished_job_and_its_50_metric_rows_are_identical_after_a_restart)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 2));
    char train[512], id[64];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 50, 128), id, sizeof id);
    json_decref(wait_job_done(&D, id, 60));
    json_t *before = job_and_metrics(id);
    cr_assert_eq(json_array_size(json_object_get(json_object_get(before, "metrics"), "rows")), 50);
    json_t *list_before = get_json(&D, "/jobs", 200);

    restart();

    json_t *after = job_and_metrics(id);
    char *a = json_dumps(before, JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    char *b = json_dumps(after, JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    cr_expect_str_eq(b, a, "GET /jobs/{id} and its metrics changed across a restart");
    json_t *list_after = get_json(&D, "/jobs", 200);
    cr_expect(json_equal(list_before, list_after), "GET /jobs changed across a restart");
    free(a);
    free(b);
    json_decref(before);
    json_decref(after);
    json_decref(list_before);
    json_decref(list_after);
}

Test(persist, a_deleted_job_and_its_checkpoint_files_stay_deleted_after_a_restart)
{
    cr_assert(gen_dctaxi(&D, "dev", 1000, 1));
    char train[512], id[64], path[128], dir[400];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 5, 64), id, sizeof id);
    json_decref(wait_job_done(&D, id, 30));
    char state[300];
    daemon_state_dir(&D, state, sizeof state);
    snprintf(dir, sizeof dir, "%s/checkpoints/%s", state, id);
    struct stat st;
    cr_assert_eq(stat(dir, &st), 0, "a finished job has its final checkpoint in %s", dir);
    snprintf(path, sizeof path, "/jobs/%s", id);
    struct http_reply r;
    cr_assert(http(&D, "DELETE", path, NULL, NULL, &r));
    cr_expect_eq(r.status, 200, "%s", r.body);
    http_reply_free(&r);
    cr_expect_neq(stat(dir, &st), 0, "%s is still there", dir);
    restart();
    json_decref(get_json(&D, path, 404));
}

Test(persist, a_failed_job_keeps_its_error_after_a_restart)
{
    char id[64], path[128];
    submit_job(&D, baseline_spec("missing/part*.csv", 1, 1), id, sizeof id);
    json_t *job = wait_job_done(&D, id, 30);
    restart();
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *again = get_json(&D, path, 200);
    cr_expect_str_eq(json_string_value(json_object_get(again, "state")), "failed");
    cr_expect(json_equal(json_object_get(job, "error"), json_object_get(again, "error")));
    json_decref(job);
    json_decref(again);
}

/*
 * Submits spec (n iterations), stops traind with SIGTERM once the job has trained a few steps,
 * starts it again, and checks the job goes on from its checkpoint (not from 0) and ends with
 * every iteration once and exactly the losses of the same spec run uninterrupted.
 */
static void stop_resume_and_compare(const char *spec, size_t n)
{
    char id[64], twin[64], line[160];
    submit_job(&D, spec, id, sizeof id);
    wait_job_iterations(&D, id, 5);
    restart();
    snprintf(line, sizeof line, "job %s stopped for shutdown", id);
    cr_assert(daemon_log_contains(&D, line), "the job had ended before SIGTERM; nothing was tested: %s", spec);
    snprintf(line, sizeof line, "job %s stopped for shutdown; it goes on from iteration 0", id);
    cr_expect(!daemon_log_contains(&D, line), "it starts over rather than going on from its checkpoint");

    /* A second job on the same data and seed, never interrupted, is the reference. */
    submit_job(&D, spec, twin, sizeof twin);
    json_t *job = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "%s", spec);
    json_decref(job);
    json_decref(wait_job_done(&D, twin, 120));
    double *resumed = malloc(n * sizeof *resumed), *reference = malloc(n * sizeof *reference);
    cr_assert(resumed && reference);
    job_losses(&D, id, resumed, n);
    job_losses(&D, twin, reference, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(resumed[i], reference[i], "%s, iteration %zu: %.17g after the restart, %.17g uninterrupted",
                     spec, i, resumed[i], reference[i]);
    free(resumed);
    free(reference);
}

Test(persist, sigterm_stops_a_running_job_which_goes_on_after_the_restart_with_an_uninterrupted_runs_losses)
{
    cr_assert(gen_dctaxi(&D, "dev", 3000, 2));
    char train[512];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    stop_resume_and_compare(baseline_spec(train, 20000, 64), 20000);
}

Test(persist, after_sigkill_a_running_job_goes_on_with_monotonic_metrics_and_succeeds)
{
    enum { N = 100000 };
    cr_assert(gen_dctaxi(&D, "dev", 3000, 2));
    char train[512], id[64], line[256];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    submit_job(&D, spec_with(baseline_spec(train, N, 64), "\"checkpoint_every\":1000"), id, sizeof id);
    wait_job_iterations(&D, id, 3000);
    usleep(300 * 1000);   /* some rows past the checkpoint reach the database */

    daemon_kill(&D);
    cr_assert(daemon_spawn(&D, NULL), "traind did not start after SIGKILL");
    snprintf(line, sizeof line, "job %s was running when traind last stopped", id);
    cr_assert(daemon_log_contains(&D, line), "the job had ended before SIGKILL; nothing was tested");
    snprintf(line, sizeof line, "job %s was running when traind last stopped without a shutdown; it goes "
             "on from iteration 0", id);
    cr_expect(!daemon_log_contains(&D, line), "it starts over rather than going on from its checkpoint");

    json_t *job = wait_job_done(&D, id, 120);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
    json_decref(job);
    static double loss[N];
    job_losses(&D, id, loss, N);   /* one row per iteration, in order: no gap, no repeat */
}

Test(persist, new_jobs_are_refused_with_503_while_stopping)
{
    daemon_stop(&D, 20);
    setenv("TRAIND_TEST_LINGER_MS", "3000", 1);
    cr_assert(daemon_spawn(&D, NULL));
    unsetenv("TRAIND_TEST_LINGER_MS");
    cr_assert_eq(kill(D.pid, SIGTERM), 0);
    usleep(200 * 1000);
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", baseline_spec("x.csv", 1, 1), &r));
    cr_expect_eq(r.status, 503, "%s", r.body);
    cr_expect_str_eq(reply_error_code(&r), "unavailable");
    char buf[16];
    cr_expect_not_null(http_header(&r, "Retry-After", buf, sizeof buf));
    http_reply_free(&r);
    cr_assert(http(&D, "GET", "/jobs", NULL, NULL, &r));
    cr_expect_eq(r.status, 200, "reading still works while stopping");
    http_reply_free(&r);
}

Test(persist, the_state_directory_is_created_private)
{
    char path[400];
    daemon_state_dir(&D, path, sizeof path);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0700, "mode %o", st.st_mode & 0777);
}

Test(persist, an_adam_job_stopped_by_sigterm_goes_on_with_its_optimizer_state_and_an_uninterrupted_runs_losses)
{
    enum { N = 20000 };
    cr_assert(gen_dctaxi(&D, "dev", 3000, 2));
    char spec[700];
    /* Adam's moments and step count are in the checkpoint, so the losses are an uninterrupted run's. */
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\"},\"optimizer\":{\"type\":\"adam\",\"lr\":0.01},"
             "\"batch_size\":64,\"iterations\":%d}", D.dir, N);
    stop_resume_and_compare(spec, N);
}

/*
 * The daemon's files can no longer grow from now on (until room_again), as on a full disk:
 * its log is emptied, then RLIMIT_FSIZE 0 is set on the running process.
 */
static void disk_full(void)
{
    char path[400], state[300];
    daemon_state_dir(&D, state, sizeof state);
    snprintf(path, sizeof path, "%s/traind.db", state);
    sqlite3 *c;
    cr_assert_eq(sqlite3_open(path, &c), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(c, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL), SQLITE_OK,
                 "%s", sqlite3_errmsg(c));
    sqlite3_close(c);
    struct rlimit none = {0, RLIM_INFINITY};
    cr_assert_eq(prlimit(D.pid, RLIMIT_FSIZE, &none, NULL), 0);
}

static void room_again(void)
{
    struct rlimit any = {RLIM_INFINITY, RLIM_INFINITY};
    cr_assert_eq(prlimit(D.pid, RLIMIT_FSIZE, &any, NULL), 0);
}

#define SMALL_SPEC "{\"client_id\":\"%s\",\"data\":{\"train\":\"%s\"},\"model\":{\"type\":\"linear\"}," \
                   "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.03},\"clip_grad_norm\":0.5,\"batch_size\":64," \
                   "\"iterations\":3}"

Test(persist, a_job_is_acknowledged_only_once_recorded_and_a_full_disk_gets_503_while_the_daemon_serves)
{
    cr_assert(gen_dctaxi(&D, "dev", 500, 1));
    char train[512], body[1024], first[64];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    snprintf(body, sizeof body, SMALL_SPEC, "before", train);
    submit_job(&D, body, first, sizeof first);
    json_decref(wait_job_done(&D, first, 30));

    disk_full();
    struct http_reply r;
    snprintf(body, sizeof body, SMALL_SPEC, "while-full", train);
    cr_assert(http(&D, "POST", "/jobs", "application/json", body, &r));
    cr_expect_eq(r.status, 503, "a job the database did not take is not acknowledged: %s", r.body);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(r.json, "error"), "code")), "unavailable");
    http_reply_free(&r);
    json_decref(get_json(&D, "/healthz", 200));
    json_t *list = get_json(&D, "/jobs", 200);
    cr_expect_eq(json_array_size(json_object_get(list, "jobs")), 1, "only the acknowledged job is listed");
    json_decref(list);

    room_again();
    char second[64];
    submit_job(&D, body, second, sizeof second);   /* the same client_id, sent again, is a new job */
    json_decref(wait_job_done(&D, second, 30));
    restart();
    list = get_json(&D, "/jobs", 200);
    cr_expect_eq(json_array_size(json_object_get(list, "jobs")), 2, "both acknowledged jobs are there");
    json_decref(list);
}

/*
 * Each network form of the job spec, stopped by SIGTERM while it trains and started again:
 * it finishes with every iteration once, in order, and the losses of an uninterrupted twin.
 * The MLP is docs/api.md's example, with its outputs left to the data (stored without them).
 */
Test(persist, every_network_form_stopped_by_sigterm_finishes_with_all_its_iterations)
{
    enum { N = 6000 };
    static const char *const models[] = {
        "\"model\":{\"type\":\"mlp\",\"hidden\":[16,16],\"activation\":\"relu\"}",
        "\"model\":{\"layers\":[{\"linear\":8},{\"tanh\":{}},{\"linear\":4},{\"sigmoid\":{}},{\"linear\":1}]}",
    };
    cr_assert(gen_dctaxi(&D, "dev", 3000, 2));
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        char spec[900];
        snprintf(spec, sizeof spec,
                 "{\"data\":{\"train\":\"%s/dev/part*.csv\"},%s,\"optimizer\":{\"type\":\"adam\",\"lr\":0.001},"
                 "\"dtype\":\"float32\",\"batch_size\":64,\"iterations\":%d,\"seed\":%zu}", D.dir, models[m], N, m);
        stop_resume_and_compare(spec, N);
    }
}
