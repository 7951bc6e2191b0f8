/* test_db.c — persistence: what the registry holds survives a close and a reopen of the state directory. */
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "db.h"
#include "job.h"

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/traind-db-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(db, .init = make_dir, .fini = remove_dir);

static struct job_spec *spec_of(const char *text)
{
    json_t *root = json_loads(text, 0, NULL);
    cr_assert_not_null(root);
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(spec_parse(root, &s, &se), 0, "%s: %s", se.field, se.message);
    json_decref(root);
    return s;
}

#define SPEC "{\"name\":\"n\",\"client_id\":\"c1\",\"data\":{\"train\":\"x\"},\"iterations\":4,\"optimizer\":{\"type\":\"adam\",\"lr\":0.5}}"

static struct metrics_row row(int it, double loss)
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

static char *render(struct job_registry *r)
{
    json_t *a = json_array();
    for (size_t i = 0; i < job_registry_count(r); i++) {
        struct job *j = job_registry_at(r, i);
        json_array_append_new(a, job_to_json(j, 1));
        json_array_append_new(a, job_metrics_to_json(j, 0, 1000, 0));
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
        struct metrics_row m = row(i, 10.0 / (i + 1));
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
    char *before = render(r);
    db_close(d);
    job_registry_free(r);

    d = open_attached(dir, &r);
    cr_assert_eq(job_registry_count(r), 2);
    cr_expect_str_eq(job_id(job_registry_at(r, 0)), job_id(job_registry_at(r, 0)));
    char *after = render(r);
    cr_expect_str_eq(after, before);
    free(before);
    free(after);
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
        struct metrics_row m = row(i, 1.0);
        if (i % 2 == 1)
            m.v[METRIC_EVAL_LOSS] = 0.25 + i;
        cr_assert_eq(job_append_metrics(j, &m, &e), 0);
    }
    char *before = render(r);
    db_close(d);
    job_registry_free(r);

    d = open_attached(dir, &r);
    j = job_registry_at(r, 0);
    char *after = render(r);
    cr_expect_str_eq(after, before);
    json_t *m = job_metrics_to_json(j, 0, 100, 0);
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
        struct metrics_row m = row(i, 1.0);
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
    json_t *m = job_metrics_to_json(j, 0, 100, 0);
    cr_expect_eq(json_array_size(json_object_get(m, "rows")), 0);
    json_decref(m);
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
