/* test_db.c — persistence: what the registry holds survives a close and a reopen of the state directory. */
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "db.h"
#include "history.h"
#include "job.h"
#include "job_helpers.h"
#include "job_json.h"
#include "scratch_dir.h"

TestSuite(db, .init = scratch_dir_make, .fini = scratch_dir_remove);

#define SPEC "{\"name\":\"n\",\"client_id\":\"c1\",\"data\":{\"train\":\"x\"},\"iterations\":4,\"optimizer\":{\"type\":\"adam\",\"lr\":0.5}}"

/* A row at the spec's learning rate. */
static struct metrics_row spec_row(int it, double loss)
{
    struct metrics_row r = {.v = {[METRIC_ITERATION] = it, [METRIC_TIME] = 1.7e9 + it,
                                  [METRIC_LOSS] = loss, [METRIC_LR] = 0.5, [METRIC_EVAL_LOSS] = NAN}};
    return r;
}

/* A state dir/traind.db with one job, attached to r. */
static struct db *open_attached(const char *path, struct job_registry **r)
{
    struct err e = {0};
    struct db *d;
    cr_assert_eq(db_open(path, &d, &e), 0, "%s", e.msg);
    *r = job_registry_new(&e);
    cr_assert_eq(db_load(d, *r, &e), 0, "%s", e.msg);
    db_attach(d, *r);
    return d;
}

static char *render(struct db *d, struct job_registry *r)
{
    json_t *a = json_array();
    for (size_t i = 0; i < job_registry_count(r); i++) {
        struct job *j = job_registry_at(r, i);
        json_array_append_new(a, api_job_json(j, 1));
        json_array_append_new(a, db_metrics_to_json(d, j, 0, 1000, 0));
    }
    char *s = json_dumps(a, JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(a);
    return s;
}

Test(db, jobs_metrics_errors_and_parameters_survive_a_reopen)
{
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    struct err e = {0};
    struct job *ok = job_registry_add(r, spec_of(SPEC), &e);
    struct job *bad = job_registry_add(r, spec_of("{\"data\":{\"train\":\"y\"},\"iterations\":9}"), &e);
    job_mark_running(ok, "cpu");
    for (int i = 0; i < 4; i++) {
        struct metrics_row m = spec_row(i, 10.0 / (i + 1));
        cr_assert_eq(job_append_metrics(ok, &m, &e), 0);
    }
    struct job_params *ps = calloc(1, sizeof *ps);
    ps->n = 2;
    ps->p = calloc(2, sizeof *ps->p);
    snprintf(ps->p[0].name, sizeof ps->p[0].name, "w");
    ps->p[0].rows = 2;
    ps->p[0].cols = 1;
    ps->p[0].values = malloc(2 * sizeof(double));
    ps->p[0].values[0] = 0.1;
    ps->p[0].values[1] = -1.0 / 3.0;
    snprintf(ps->p[1].name, sizeof ps->p[1].name, "b");
    ps->p[1].rows = 1;
    ps->p[1].cols = 1;
    ps->p[1].values = malloc(sizeof(double));
    ps->p[1].values[0] = 2.5;
    job_finish(ok, ERR_OK, NULL, ps);
    job_mark_running(bad, "cpu");
    job_finish(bad, ERR_INVALID_DATA, "x:3:2: not a number", NULL);
    char *before = render(d, r);
    db_close(d);
    job_registry_free(r);

    d = open_attached(dir, &r);
    cr_assert_eq(job_registry_count(r), 2);
    cr_expect_str_eq(job_id(job_registry_at(r, 0)), job_id(job_registry_at(r, 0)));
    char *after = render(d, r);
    cr_expect_str_eq(after, before);
    free(before);
    free(after);
    db_close(d);
    job_registry_free(r);
}

Test(db, the_data_a_run_read_survives_a_reopen_and_none_stays_none)
{
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    struct err e = {0};
    struct job *read = job_registry_add(r, spec_of(SPEC), &e);
    cr_assert_not_null(job_registry_add(r, spec_of("{\"data\":{\"train\":\"y\"},\"iterations\":9}"), &e));
    job_mark_running(read, "cpu");
    struct metrics_row m = spec_row(0, 1.0);
    cr_assert_eq(job_append_metrics(read, &m, &e), 0);
    job_set_data_bytes(read, 44018, 172381);
    job_finish(read, ERR_OK, NULL, NULL);
    db_close(d);
    job_registry_free(r);

    d = open_attached(dir, &r);
    uint64_t fetched = 0, total = 0;
    cr_assert(job_data_bytes(job_registry_at(r, 0), &fetched, &total));
    cr_expect_eq(fetched, 44018);
    cr_expect_eq(total, 172381);
    cr_expect_not(job_data_bytes(job_registry_at(r, 1), &fetched, &total), "a job that read nothing says so");
    db_close(d);
    job_registry_free(r);
}

Test(db, eval_loss_and_its_nulls_survive_a_reopen)
{
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    struct err e = {0};
    struct job *j = job_registry_add(r, spec_of(SPEC), &e);
    job_mark_running(j, "cpu");
    for (int i = 0; i < 4; i++) {
        struct metrics_row m = spec_row(i, 1.0);
        if (i % 2 == 1)
            m.v[METRIC_EVAL_LOSS] = 0.25 + i;
        cr_assert_eq(job_append_metrics(j, &m, &e), 0);
    }
    char *before = render(d, r);
    db_close(d);
    job_registry_free(r);

    d = open_attached(dir, &r);
    j = job_registry_at(r, 0);
    char *after = render(d, r);
    cr_expect_str_eq(after, before);
    json_t *m = db_metrics_to_json(d, j, 0, 100, 0);
    json_t *rows = json_object_get(m, "rows");
    cr_assert_eq(json_array_size(rows), 4);
    cr_expect(json_is_null(json_array_get(json_array_get(rows, 2), METRIC_EVAL_LOSS)));
    cr_expect_eq(json_real_value(json_array_get(json_array_get(rows, 3), METRIC_EVAL_LOSS)), 3.25);
    double loss;
    cr_expect_eq(job_last_eval(j, &loss), 3);
    cr_expect_eq(loss, 3.25);
    json_decref(m);
    free(before);
    free(after);
    db_close(d);
    job_registry_free(r);
}

Test(db, rows_past_a_requeue_point_are_gone_after_a_reopen)
{
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    struct err e = {0};
    struct job *j = job_registry_add(r, spec_of(SPEC), &e);
    job_mark_running(j, "cpu");
    for (int i = 0; i < 4; i++) {
        struct metrics_row m = spec_row(i, 1.0);
        job_append_metrics(j, &m, &e);
    }
    cr_assert_eq(db_flush(d, &e), 0, "%s", e.msg);
    cr_assert_eq(job_requeue(j, 0), 0);
    db_close(d);
    job_registry_free(r);

    d = open_attached(dir, &r);
    j = job_registry_at(r, 0);
    cr_expect_eq(job_state(j), JOB_QUEUED);
    cr_expect_eq(job_iterations_done(j), 0);
    json_t *m = db_metrics_to_json(d, j, 0, 100, 0);
    cr_expect_eq(json_array_size(json_object_get(m, "rows")), 0);
    json_decref(m);
    db_close(d);
    job_registry_free(r);
}

/* A straggler warning, and its ratio raised later, come back after a restart as they were. */
Test(db, a_jobs_warnings_survive_a_reopen_and_a_requeue)
{
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    struct err e = {0};
    struct job *j = job_registry_add(r, spec_of(SPEC), &e);
    job_mark_running(j, "cpu:0");
    struct metrics_row m = spec_row(0, 1.0);
    cr_assert_eq(job_append_metrics(j, &m, &e), 0);
    cr_expect_null(job_warnings(j));
    cr_expect(job_warn_straggler(j, 1, "box", "cpu:1", 1.75));
    cr_expect(!job_warn_straggler(j, 1, "box", "cpu:1", 1.8), "a ratio up by less than a tenth was taken for news");
    cr_expect(job_warn_straggler(j, 1, "box", "cpu:1", 2.5));
    cr_assert_eq(job_requeue(j, 0), 0);
    char *before = render(d, r);
    db_close(d);
    job_registry_free(r);

    d = open_attached(dir, &r);
    j = job_registry_at(r, 0);
    char *after = render(d, r);
    cr_expect_str_eq(after, before);
    const json_t *w = job_warnings(j);
    cr_assert_eq(json_array_size(w), 1, "%zu warnings", json_array_size(w));
    const json_t *x = json_array_get(w, 0);
    cr_expect_str_eq(json_string_value(json_object_get(x, "kind")), "straggler");
    cr_expect_eq(json_integer_value(json_object_get(x, "replica")), 1);
    cr_expect_str_eq(json_string_value(json_object_get(x, "host")), "box");
    cr_expect_str_eq(json_string_value(json_object_get(x, "device")), "cpu:1");
    cr_expect_eq(json_real_value(json_object_get(x, "ratio")), 2.5);
    cr_expect_eq(json_integer_value(json_object_get(x, "since_iteration")), 1);
    free(before);
    free(after);
    db_close(d);
    job_registry_free(r);
}

Test(db, a_removed_job_is_gone_after_a_reopen)
{
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    struct err e = {0};
    struct job *j = job_registry_add(r, spec_of(SPEC), &e);
    job_finish(j, ERR_CANCELLED, NULL, NULL);
    cr_assert_eq(job_registry_remove(r, j), 0);
    db_close(d);
    job_registry_free(r);
    d = open_attached(dir, &r);
    cr_expect_eq(job_registry_count(r), 0);
    db_close(d);
    job_registry_free(r);
}

Test(db, schema_version_is_set_and_a_newer_one_is_refused)
{
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    db_close(d);
    job_registry_free(r);
    char path[128];
    snprintf(path, sizeof path, "%s/traind.db", dir);
    sqlite3 *c;
    cr_assert_eq(sqlite3_open(path, &c), SQLITE_OK);
    sqlite3_stmt *s;
    cr_assert_eq(sqlite3_prepare_v2(c, "PRAGMA user_version", -1, &s, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    cr_expect_eq(sqlite3_column_int(s, 0), DB_SCHEMA_VERSION);
    sqlite3_finalize(s);
    cr_assert_eq(sqlite3_exec(c, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(c);
    struct err e = {0};
    cr_expect_neq(db_open(dir, &d, &e), 0);
    cr_expect_not_null(strstr(e.msg, "newer traind"), "%s", e.msg);
}

Test(db, a_missing_state_directory_is_created_mode_0700)
{
    char sub[128];
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    struct err e = {0};
    struct db *d;
    cr_assert_eq(db_open(sub, &d, &e), 0, "%s", e.msg);
    struct stat st;
    cr_assert_eq(stat(sub, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0700);
    db_close(d);
}

Test(db, the_journal_is_wal)
{
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    db_close(d);
    job_registry_free(r);
    char path[128];
    snprintf(path, sizeof path, "%s/traind.db", dir);
    sqlite3 *c;
    cr_assert_eq(sqlite3_open(path, &c), SQLITE_OK);
    sqlite3_stmt *s;
    cr_assert_eq(sqlite3_prepare_v2(c, "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    cr_expect_str_eq((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    sqlite3_close(c);
}

/*
 * The state directory's file system is full from now on (until disk_has_room): the log is
 * emptied, and no file of this process may grow, as when the disk has no free block.
 */
static struct rlimit saved_fsize;

static void disk_full(const char *db_dir)
{
    char path[128];
    snprintf(path, sizeof path, "%s/traind.db", db_dir);
    sqlite3 *c;
    cr_assert_eq(sqlite3_open(path, &c), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(c, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(c);
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &saved_fsize), 0);
    struct rlimit none = {.rlim_cur = 0, .rlim_max = saved_fsize.rlim_max};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &none), 0);
}

static void disk_has_room(void)
{
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &saved_fsize), 0);
}

Test(db, a_job_the_database_cannot_take_is_not_added_and_later_changes_are_written_once_it_can)
{
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    struct err e = {0};
    struct job *a = job_registry_add(r, spec_of(SPEC), &e);
    cr_assert_not_null(a, "%s", e.msg);
    disk_full(dir);
    struct err full = {0};
    cr_expect_null(job_registry_add(r, spec_of("{\"data\":{\"train\":\"y\"},\"iterations\":9}"), &full));
    cr_expect_eq(full.code, ERR_IO, "the add fails as a write that failed: %s", full.msg);
    cr_expect_eq(job_registry_count(r), 1, "a job the database did not take is not there");
    job_mark_running(a, "cpu");
    struct metrics_row m = spec_row(0, 2.5);
    job_append_metrics(a, &m, &e);
    job_finish(a, ERR_OK, NULL, NULL);
    cr_expect_neq(db_flush(d, &e), 0, "nothing can be written yet");
    disk_has_room();
    cr_expect_eq(db_flush(d, &e), 0, "%s", e.msg);
    db_close(d);
    job_registry_free(r);

    d = open_attached(dir, &r);
    cr_assert_eq(job_registry_count(r), 1);
    cr_expect_eq(job_state(job_registry_at(r, 0)), JOB_SUCCEEDED, "the change made while full is there");
    json_t *page = db_metrics_to_json(d, job_registry_at(r, 0), 0, 10, 0);
    cr_expect_eq(json_array_size(json_object_get(page, "rows")), 1, "and so is the row");
    json_decref(page);
    db_close(d);
    job_registry_free(r);
}

/* Writes a jobs row by hand, as an older or newer traind might have. */
static void plant_job(const char *id, const char *client_id, const char *state, const char *spec)
{
    char path[128];
    snprintf(path, sizeof path, "%s/traind.db", dir);
    sqlite3 *c;
    sqlite3_stmt *s;
    cr_assert_eq(sqlite3_open(path, &c), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(c, "INSERT INTO jobs (id, client_id, state, priority, spec, created_at)"
                                       " VALUES (?, ?, ?, 0, ?, 1.7e9)", -1, &s, NULL), SQLITE_OK);
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, client_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, state, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, spec, -1, SQLITE_STATIC);
    cr_assert_eq(sqlite3_step(s), SQLITE_DONE, "%s", sqlite3_errmsg(c));
    sqlite3_finalize(s);
    sqlite3_close(c);
}

Test(db, a_row_this_build_cannot_read_is_listed_as_failed_with_its_spec_and_keeps_its_client_id)
{
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    db_close(d);
    job_registry_free(r);
    plant_job("00000000000000aa", "k1", "queued", "{\"data\":{\"train\":\"x\"},\"iterations\":3,\"from_the_future\":1}");
    plant_job("00000000000000bb", NULL, "running", "{not json");
    plant_job("00000000000000cc", NULL, "hibernating", "{\"data\":{\"train\":\"x\"},\"iterations\":3}");

    d = open_attached(dir, &r);
    cr_assert_eq(job_registry_count(r), 3, "every row is listed");
    for (size_t i = 0; i < 3; i++) {
        struct job *j = job_registry_at(r, i);
        json_t *o = api_job_json(j, 1);
        cr_expect_str_eq(json_string_value(json_object_get(o, "state")), "failed", "job %s", job_id(j));
        cr_expect_str_eq(json_string_value(json_object_get(json_object_get(o, "error"), "code")),
                         "unreadable_spec", "job %s", job_id(j));
        json_decref(o);
    }
    struct job *a = job_registry_find_client_id(r, "k1");
    cr_assert_not_null(a, "the client_id stays bound to its row");
    json_t *o = api_job_json(a, 1);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(o, "spec"), "from_the_future")), 1,
                 "the spec is shown as stored");
    json_decref(o);
    o = api_job_json(job_registry_find(r, "00000000000000bb"), 1);
    cr_expect_str_eq(json_string_value(json_object_get(o, "spec")), "{not json");
    json_decref(o);
    cr_assert_eq(job_registry_remove(r, a), 0, "it can be deleted like any ended job");
    db_close(d);
    job_registry_free(r);

    d = open_attached(dir, &r);
    cr_expect_eq(job_registry_count(r), 2);
    cr_expect_null(job_registry_find_client_id(r, "k1"));
    db_close(d);
    job_registry_free(r);
}

/* A state database as traind wrote it before metrics were stored in blocks (schema version 1). */
static void plant_version_1(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/traind.db", dir);
    sqlite3 *c;
    cr_assert_eq(sqlite3_open(path, &c), SQLITE_OK);
    const char *sql =
        "CREATE TABLE jobs (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, client_id TEXT UNIQUE,"
        " name TEXT, state TEXT NOT NULL, priority INTEGER NOT NULL, spec TEXT NOT NULL, device TEXT,"
        " created_at REAL, started_at REAL, finished_at REAL, iterations_done INTEGER NOT NULL DEFAULT 0,"
        " error_code INTEGER NOT NULL DEFAULT 0, error_message TEXT, params TEXT);"
        "CREATE TABLE metrics (job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
        " kind TEXT NOT NULL DEFAULT 'train', iteration INTEGER NOT NULL, time REAL, loss REAL,"
        " seconds_per_iteration REAL, samples_per_second REAL, data_wait_seconds REAL, grad_norm REAL,"
        " lr REAL, eval_loss REAL, PRIMARY KEY (job_id, kind, iteration)) WITHOUT ROWID;"
        "CREATE TABLE checkpoints (job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
        " iteration INTEGER NOT NULL, epoch INTEGER NOT NULL, path TEXT NOT NULL, created REAL NOT NULL,"
        " PRIMARY KEY (job_id, iteration));"
        "INSERT INTO jobs (id, state, priority, spec, iterations_done) VALUES ('0123456789abcdef',"
        " 'succeeded', 0, '{\"data\":{\"train\":\"x\"},\"iterations\":3}', 3);"
        "INSERT INTO metrics VALUES ('0123456789abcdef', 'train', 0, 1700000000.25, 9.5, 0.5, 100, 0, 1, 0.03, NULL),"
        " ('0123456789abcdef', 'train', 1, 1700000001.5, 0.1, 0.25, 200, 0.125, 2, 0.03, 7.75),"
        " ('0123456789abcdef', 'train', 2, 1700000002.75, 3.0, 0.125, 400, 0, 3, 0.03, NULL);"
        "PRAGMA user_version = 1;";
    cr_assert_eq(sqlite3_exec(c, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(c));
    sqlite3_close(c);
}

Test(db, metrics_rows_of_a_version_1_database_are_kept_when_it_is_migrated)
{
    plant_version_1();
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    cr_assert_eq(job_registry_count(r), 1);
    json_t *page = db_metrics_to_json(d, job_registry_at(r, 0), 0, 10, 0);
    char *got = json_dumps(json_object_get(page, "rows"), JSON_COMPACT | JSON_REAL_PRECISION(17));
    cr_expect_str_eq(got, "[[0,1700000000.25,9.5,0.5,100.0,0.0,1.0,0.029999999999999999,null],"
                          "[1,1700000001.5,0.10000000000000001,0.25,200.0,0.125,2.0,0.029999999999999999,7.75],"
                          "[2,1700000002.75,3.0,0.125,400.0,0.0,3.0,0.029999999999999999,null]]");
    double loss;
    cr_expect_eq(job_last_eval(job_registry_at(r, 0), &loss), 1);
    cr_expect_eq(loss, 7.75);
    free(got);
    json_decref(page);
    db_close(d);
    job_registry_free(r);
}

Test(db, rows_waiting_too_long_for_a_full_disk_are_dropped_oldest_first_and_counted, .timeout = 120)
{
    struct job_registry *r;
    struct db *d = open_attached(dir, &r);
    struct err e = {0};
    struct job *j = job_registry_add(r, spec_of("{\"data\":{\"train\":\"y\"},\"iterations\":3000000}"), &e);
    job_mark_running(j, "cpu");
    disk_full(dir);
    int64_t n = (int64_t)HIST_MAX_PENDING_ROWS + 100000;
    for (int64_t i = 0; i < n; i++) {
        struct metrics_row m = spec_row((int)i, 1.0);
        job_append_metrics(j, &m, &e);
    }
    struct db_stats st;
    db_stats(d, &st);
    cr_expect_gt(st.dropped_rows, 0);
    cr_expect_leq(st.pending_rows, HIST_MAX_PENDING_ROWS, "memory stays bounded");
    cr_expect_eq(st.dropped_rows + st.pending_rows, (uint64_t)n, "every row is kept or counted");
    disk_has_room();
    cr_assert_eq(db_flush(d, &e), 0, "%s", e.msg);
    json_t *page = db_metrics_to_json(d, j, 0, 1, 0);
    cr_expect_eq(json_integer_value(json_array_get(json_array_get(json_object_get(page, "rows"), 0), 0)),
                 (json_int_t)st.dropped_rows, "the oldest rows went, the newest stayed");
    json_decref(page);
    db_close(d);
    job_registry_free(r);
}
