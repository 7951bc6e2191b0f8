/* db.c — SQLite persistence: schema and migrations, loading at start, batched writes from the registry's observer. */
#include "db.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "log.h"

#define DB_BUSY_TIMEOUT_MS 5000

/* Each entry takes the schema from version i to i + 1; never edit one that has shipped. */
static const char *const migrations[] = {
    "CREATE TABLE jobs ("
    "  seq INTEGER PRIMARY KEY,"                      /* submission order */
    "  id TEXT NOT NULL UNIQUE,"
    "  client_id TEXT UNIQUE,"
    "  name TEXT,"
    "  state TEXT NOT NULL,"
    "  priority INTEGER NOT NULL,"
    "  spec TEXT NOT NULL,"                           /* JSON, every default written out */
    "  device TEXT,"
    "  created_at REAL, started_at REAL, finished_at REAL,"
    "  iterations_done INTEGER NOT NULL DEFAULT 0,"
    "  error_code INTEGER NOT NULL DEFAULT 0,"        /* enum err_code */
    "  error_message TEXT,"
    "  params TEXT);"                                 /* JSON {name: {shape, data}} */
    "CREATE TABLE metrics ("
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  kind TEXT NOT NULL DEFAULT 'train',"           /* 'train' or 'eval' */
    "  iteration INTEGER NOT NULL,"
    "  time REAL, loss REAL, seconds_per_iteration REAL, samples_per_second REAL,"
    "  data_wait_seconds REAL, grad_norm REAL, lr REAL, eval_loss REAL,"
    "  PRIMARY KEY (job_id, kind, iteration)) WITHOUT ROWID;"
    "CREATE TABLE checkpoints ("
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  iteration INTEGER NOT NULL,"                   /* iterations done when taken */
    "  epoch INTEGER NOT NULL,"
    "  path TEXT NOT NULL,"
    "  created REAL NOT NULL,"
    "  PRIMARY KEY (job_id, iteration));",
};

enum stmt_id {
    ST_BEGIN, ST_COMMIT, ST_ROLLBACK, ST_UPSERT_JOB, ST_INSERT_ROW, ST_PROGRESS, ST_TRUNCATE,
    ST_DELETE_JOB, ST_INSERT_CKPT, ST_OLD_CKPT_PATHS, ST_OLD_CKPTS, ST_CKPT_PATHS, ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_UPSERT_JOB] =
        "INSERT INTO jobs (id, client_id, name, state, priority, spec, device, created_at,"
        " started_at, finished_at, iterations_done, error_code, error_message, params)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
        " ON CONFLICT (id) DO UPDATE SET state = ?4, device = ?7, started_at = ?9,"
        " finished_at = ?10, iterations_done = ?11, error_code = ?12, error_message = ?13,"
        " params = ?14",
    /* One row per iteration, eval_loss in it (NULL where no evaluation ran); kind 'eval' stays unused. */
    [ST_INSERT_ROW] =
        "INSERT OR REPLACE INTO metrics (job_id, kind, iteration, time, loss,"
        " seconds_per_iteration, samples_per_second, data_wait_seconds, grad_norm, lr, eval_loss)"
        " VALUES (?, 'train', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    [ST_PROGRESS] = "UPDATE jobs SET iterations_done = max(iterations_done, ?2) WHERE id = ?1",
    [ST_TRUNCATE] = "DELETE FROM metrics WHERE job_id = ? AND iteration >= ?",
    [ST_DELETE_JOB] = "DELETE FROM jobs WHERE id = ?",
    [ST_INSERT_CKPT] =
        "INSERT OR REPLACE INTO checkpoints (job_id, iteration, epoch, path, created)"
        " VALUES (?, ?, ?, ?, ?)",
    /* Only the latest file is kept: older ones go once the new one is recorded. */
    [ST_OLD_CKPT_PATHS] = "SELECT path FROM checkpoints WHERE job_id = ? AND iteration < ?",
    [ST_OLD_CKPTS] = "DELETE FROM checkpoints WHERE job_id = ? AND iteration < ?",
    [ST_CKPT_PATHS] = "SELECT path FROM checkpoints WHERE job_id = ?",
};

struct pending_row {
    char job_id[17];
    struct metrics_row row;
};

struct db {
    sqlite3 *conn;
    int bind_rc;                       /* first failed sqlite3_bind_* since the last step */
    char **doomed;                     /* checkpoint files to remove once the transaction commits */
    size_t n_doomed, cap_doomed;
    sqlite3_stmt *st[ST_COUNT];
    char dir[4096];
    struct pending_row *rows;          /* metrics waiting for the next flush */
    size_t n_rows;
};

static int sql_fail(struct db *d, int rc, const char *what, struct err *e)
{
    return err_set(e, ERR_IO, "sqlite: %s: %s (%d)", what, d->conn ? sqlite3_errmsg(d->conn) : "", rc);
}

static int exec_sql(struct db *d, const char *sql, struct err *e)
{
    char *msg = NULL;
    int rc = sqlite3_exec(d->conn, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        err_set(e, ERR_IO, "sqlite: %s", msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return e->code;
    }
    return 0;
}

static int user_version(struct db *d, int *out, struct err *e)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(d->conn, "PRAGMA user_version", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return sql_fail(d, rc, "user_version", e);
    rc = sqlite3_step(s);
    *out = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? 0 : sql_fail(d, rc, "user_version", e);
}

static int migrate(struct db *d, struct err *e)
{
    int v;
    if (user_version(d, &v, e))
        return e->code;
    int latest = (int)(sizeof migrations / sizeof *migrations);
    if (v > latest)
        return err_set(e, ERR_INVALID_DATA,
                       "the state database has schema version %d; this traind knows up to %d "
                       "(was it written by a newer traind?)", v, latest);
    for (; v < latest; v++) {
        char set[64];
        snprintf(set, sizeof set, "PRAGMA user_version = %d", v + 1);
        if (exec_sql(d, "BEGIN IMMEDIATE", e))
            return e->code;
        if (exec_sql(d, migrations[v], e) || exec_sql(d, set, e)) {
            struct err ignored;
            exec_sql(d, "ROLLBACK", &ignored);
            return err_prefix(e, "migrating the state database to version %d", v + 1);
        }
        if (exec_sql(d, "COMMIT", e))
            return e->code;
        log_info("state database migrated to schema version %d", v + 1);
    }
    return 0;
}

int db_open(const char *state_dir, struct db **out, struct err *e)
{
    struct db *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(e, ERR_NOMEM, "db: out of memory");
    snprintf(d->dir, sizeof d->dir, "%s", state_dir);
    if (!(d->rows = malloc(DB_FLUSH_ROWS * sizeof *d->rows))) {
        free(d);
        return err_set(e, ERR_NOMEM, "db: out of memory");
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/traind.db", state_dir);
    if (fs_mkdirs(state_dir, e)) {
        db_close(d);
        return e->code;
    }
    int rc = sqlite3_open_v2(path, &d->conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                             SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        err_set(e, ERR_IO, "cannot open %s: %s", path, d->conn ? sqlite3_errmsg(d->conn) : sqlite3_errstr(rc));
        db_close(d);
        return e->code;
    }
    if ((rc = sqlite3_busy_timeout(d->conn, DB_BUSY_TIMEOUT_MS)) != SQLITE_OK) {
        sql_fail(d, rc, "busy_timeout", e);
        db_close(d);
        return e->code;
    }
    /*
     * WAL + NORMAL: a crash loses at most the last transactions, never the database.
     * Checkpoints (the only fsyncs) every 16 MiB of log rather than 4, so a job of tiny
     * batches stalls the loop thread less often.
     */
    if (exec_sql(d, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
                    " PRAGMA foreign_keys = ON; PRAGMA wal_autocheckpoint = 4096;", e) ||
        migrate(d, e)) {
        err_prefix(e, "%s", path);
        db_close(d);
        return e->code;
    }
    for (int i = 0; i < ST_COUNT; i++)
        if ((rc = sqlite3_prepare_v3(d->conn, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &d->st[i],
                                     NULL)) != SQLITE_OK) {
            sql_fail(d, rc, stmt_sql[i], e);
            db_close(d);
            return e->code;
        }
    *out = d;
    return 0;
}

const char *db_state_dir(const struct db *d)
{
    return d->dir;
}

size_t db_pending_rows(const struct db *d)
{
    return d->n_rows;
}

/* Runs a statement that returns no rows, then resets it. */
static int run(struct db *d, enum stmt_id id, struct err *e)
{
    if (d->bind_rc) {
        int brc = d->bind_rc;
        d->bind_rc = 0;
        sqlite3_clear_bindings(d->st[id]);
        return sql_fail(d, brc, stmt_sql[id], e);
    }
    int rc = sqlite3_step(d->st[id]);
    sqlite3_reset(d->st[id]);
    sqlite3_clear_bindings(d->st[id]);
    if (rc != SQLITE_DONE)
        return sql_fail(d, rc, stmt_sql[id], e);
    return 0;
}

/* For statements stepped by hand (they return rows): SQLITE_OK, or the failed bind's code, cleared. */
static int bound(struct db *d)
{
    int brc = d->bind_rc;
    d->bind_rc = 0;
    return brc;
}

static int begin(struct db *d, struct err *e)
{
    return run(d, ST_BEGIN, e);
}

/* Commits, or rolls back when rc says the transaction failed; returns rc or the commit's error. */
static int end(struct db *d, int rc, struct err *e)
{
    if (rc == 0)
        return run(d, ST_COMMIT, e);
    struct err ignored;
    run(d, ST_ROLLBACK, &ignored);
    return rc;
}

/* Binds are checked once, at the step: the first failing one is kept here and run() reports it. */
#define BIND(d, call) do { int brc_ = (call); if (brc_ != SQLITE_OK && !(d)->bind_rc) (d)->bind_rc = brc_; } while (0)

static void bind_real_or_null(struct db *d, sqlite3_stmt *s, int i, double x)
{
    if (isfinite(x))
        BIND(d, sqlite3_bind_double(s, i, x));
    else
        BIND(d, sqlite3_bind_null(s, i));
}

static void bind_text_or_null(struct db *d, sqlite3_stmt *s, int i, const char *t)
{
    if (t && *t)
        BIND(d, sqlite3_bind_text(s, i, t, -1, SQLITE_TRANSIENT));
    else
        BIND(d, sqlite3_bind_null(s, i));
}

static int write_progress(struct db *d, const struct pending_row *r, struct err *e)
{
    BIND(d, sqlite3_bind_text(d->st[ST_PROGRESS], 1, r->job_id, -1, SQLITE_STATIC));
    BIND(d, sqlite3_bind_int64(d->st[ST_PROGRESS], 2, (sqlite3_int64)r->row.v[METRIC_ITERATION] + 1));
    return run(d, ST_PROGRESS, e);
}

/* The buffered rows, inside a transaction the caller holds; a job's progress once per run of its rows. */
static int write_rows(struct db *d, struct err *e)
{
    sqlite3_stmt *s = d->st[ST_INSERT_ROW];
    for (size_t i = 0; i < d->n_rows; i++) {
        const struct pending_row *r = &d->rows[i];
        BIND(d, sqlite3_bind_text(s, 1, r->job_id, -1, SQLITE_STATIC));
        BIND(d, sqlite3_bind_int64(s, 2, (sqlite3_int64)r->row.v[METRIC_ITERATION]));
        for (int c = 1; c < METRIC_NCOLS; c++)
            bind_real_or_null(d, s, c + 2, r->row.v[c]);
        if (run(d, ST_INSERT_ROW, e))
            return e->code;
        if ((i + 1 == d->n_rows || strcmp(d->rows[i + 1].job_id, r->job_id) != 0) &&
            write_progress(d, r, e))
            return e->code;
    }
    return 0;
}

int db_flush(struct db *d, struct err *e)
{
    if (!d || d->n_rows == 0)
        return 0;
    int rc = begin(d, e);
    if (!rc)
        rc = end(d, write_rows(d, e), e);
    /* Rows that could not be written are dropped rather than retried forever; the log says so. */
    if (rc)
        log_error("could not write %zu metrics rows: %s", d->n_rows, e->msg);
    d->n_rows = 0;
    return rc;
}

/* {"w": {"shape": [8, 1], "data": [...]}, ...}: full precision, any size. */
static char *params_text(const struct job_params *ps)
{
    json_t *o = json_object();
    for (int i = 0; o && i < ps->n; i++) {
        const struct job_param *p = &ps->p[i];
        int64_t n = p->rows * (p->cols ? p->cols : 1);
        json_t *data = json_array();
        for (int64_t k = 0; data && k < n; k++)
            json_array_append_new(data, isfinite(p->values[k]) ? json_real(p->values[k]) : json_null());
        json_t *shape = p->cols ? json_pack("[I, I]", (json_int_t)p->rows, (json_int_t)p->cols)
                                : json_pack("[I]", (json_int_t)p->rows);
        json_object_set_new(o, p->name, json_pack("{s:o, s:o}", "shape", shape, "data", data));
    }
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return text;
}

static struct job_params *params_parse(const char *text)
{
    json_t *o = json_loads(text, 0, NULL);
    struct job_params *ps = calloc(1, sizeof *ps);
    size_t n = json_object_size(o);
    if (!o || !ps || !(ps->p = calloc(n ? n : 1, sizeof *ps->p))) {
        json_decref(o);
        free(ps);
        return NULL;
    }
    const char *name;
    json_t *v;
    json_object_foreach(o, name, v) {
        struct job_param *p = &ps->p[ps->n];
        json_t *shape = json_object_get(v, "shape"), *data = json_object_get(v, "data");
        snprintf(p->name, sizeof p->name, "%s", name);
        p->rows = json_integer_value(json_array_get(shape, 0));
        p->cols = json_array_size(shape) > 1 ? json_integer_value(json_array_get(shape, 1)) : 0;
        size_t count = json_array_size(data);
        if ((int64_t)count != p->rows * (p->cols ? p->cols : 1) ||
            !(p->values = malloc((count ? count : 1) * sizeof(double)))) {
            json_decref(o);
            job_params_free(ps);
            return NULL;
        }
        ps->n++;
        for (size_t k = 0; k < count; k++) {
            json_t *x = json_array_get(data, k);
            p->values[k] = json_is_number(x) ? json_number_value(x) : NAN;
        }
    }
    json_decref(o);
    return ps;
}

/*
 * Only parameters small enough for GET /jobs/{id} to show are kept in the row (the same
 * answer after a restart); the checkpoint file has them all, and predict reads that.
 */
static bool shown_params(const struct job_params *ps)
{
    if (!ps)
        return false;
    int64_t total = 0;
    for (int i = 0; i < ps->n; i++)
        total += ps->p[i].rows * (ps->p[i].cols ? ps->p[i].cols : 1);
    return total <= JOB_PARAMS_SHOW_MAX;
}

static int upsert_job(struct db *d, const struct job *j, struct err *e)
{
    sqlite3_stmt *s = d->st[ST_UPSERT_JOB];
    const struct job_spec *sp = job_spec(j);
    char *spec = NULL, *params = NULL;
    json_t *sj = spec_to_json(sp);
    if (!sj || !(spec = json_dumps(sj, JSON_COMPACT | JSON_REAL_PRECISION(17) | JSON_PRESERVE_ORDER))) {
        json_decref(sj);
        return err_set(e, ERR_NOMEM, "db: out of memory writing job %s", job_id(j));
    }
    json_decref(sj);
    if (shown_params(job_params(j)) && !(params = params_text(job_params(j)))) {
        free(spec);
        return err_set(e, ERR_NOMEM, "db: out of memory writing job %s", job_id(j));
    }
    double created, started, finished;
    job_times(j, &created, &started, &finished);
    const struct err *je = job_error(j);
    BIND(d, sqlite3_bind_text(s, 1, job_id(j), -1, SQLITE_STATIC));
    bind_text_or_null(d, s, 2, sp->client_id);
    bind_text_or_null(d, s, 3, sp->name);
    BIND(d, sqlite3_bind_text(s, 4, job_state_name(job_state(j)), -1, SQLITE_STATIC));
    BIND(d, sqlite3_bind_int(s, 5, sp->priority));
    BIND(d, sqlite3_bind_text(s, 6, spec, -1, SQLITE_STATIC));
    bind_text_or_null(d, s, 7, job_device(j));
    bind_real_or_null(d, s, 8, created > 0 ? created : NAN);
    bind_real_or_null(d, s, 9, started > 0 ? started : NAN);
    bind_real_or_null(d, s, 10, finished > 0 ? finished : NAN);
    BIND(d, sqlite3_bind_int64(s, 11, job_iterations_done(j)));
    BIND(d, sqlite3_bind_int(s, 12, job_state(j) == JOB_FAILED ? je->code : 0));
    bind_text_or_null(d, s, 13, job_state(j) == JOB_FAILED ? je->msg : NULL);
    bind_text_or_null(d, s, 14, params);
    int rc = run(d, ST_UPSERT_JOB, e);
    free(spec);
    free(params);
    return rc;
}

/* The files of job_id's checkpoints, and then its directory, are removed (best effort, logged). */
static void remove_checkpoint_files(struct db *d, const char *job_id)
{
    sqlite3_stmt *s = d->st[ST_CKPT_PATHS];
    BIND(d, sqlite3_bind_text(s, 1, job_id, -1, SQLITE_STATIC));
    int rc = bound(d);
    for (bool ok = rc == SQLITE_OK; ok && (rc = sqlite3_step(s)) == SQLITE_ROW;) {
        const char *path = (const char *)sqlite3_column_text(s, 0);
        if (path && unlink(path) != 0 && errno != ENOENT)
            log_warn("job %s: cannot remove %s: %s", job_id, path, strerror(errno));
    }
    if (rc != SQLITE_DONE)
        log_error("job %s: listing checkpoints: %s", job_id, sqlite3_errmsg(d->conn));
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/checkpoints/%s", d->dir, job_id);
    DIR *dh = opendir(dir);
    struct dirent *de;
    while (dh && (de = readdir(dh))) {
        char path[4500];
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (unlink(path) != 0)
            log_warn("job %s: cannot remove %s: %s", job_id, path, strerror(errno));
    }
    if (dh)
        closedir(dh);
    if (rmdir(dir) != 0 && errno != ENOENT)
        log_warn("job %s: cannot remove %s: %s", job_id, dir, strerror(errno));
}

/* Notes the files of job_id's checkpoints before iteration it, to remove after the commit. */
static int doom_older(struct db *d, const char *job_id, int64_t it, struct err *e)
{
    sqlite3_stmt *s = d->st[ST_OLD_CKPT_PATHS];
    BIND(d, sqlite3_bind_text(s, 1, job_id, -1, SQLITE_STATIC));
    BIND(d, sqlite3_bind_int64(s, 2, it));
    int rc = bound(d);
    for (bool ok = rc == SQLITE_OK; ok && (rc = sqlite3_step(s)) == SQLITE_ROW;) {
        const char *path = (const char *)sqlite3_column_text(s, 0);
        if (d->n_doomed == d->cap_doomed) {
            size_t cap = d->cap_doomed ? 2 * d->cap_doomed : 8;
            char **v = realloc(d->doomed, cap * sizeof *v);
            if (!v)
                break;
            d->doomed = v;
            d->cap_doomed = cap;
        }
        if (path && (d->doomed[d->n_doomed] = strdup(path)))
            d->n_doomed++;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : sql_fail(d, rc, "listing old checkpoints", e);
}

/* After a commit: the files no record points at any more. After a rollback they stay. */
static void bury(struct db *d, bool committed)
{
    for (size_t i = 0; i < d->n_doomed; i++) {
        if (committed && unlink(d->doomed[i]) != 0 && errno != ENOENT)
            log_warn("cannot remove the old checkpoint %s: %s", d->doomed[i], strerror(errno));
        free(d->doomed[i]);
    }
    d->n_doomed = 0;
}

static int write_event(struct db *d, enum job_event ev, const struct job *j, struct err *e)
{
    switch (ev) {
    case JOB_EV_ADDED:
    case JOB_EV_CHANGED:
        return upsert_job(d, j, e);
    case JOB_EV_TRUNCATED: {
        BIND(d, sqlite3_bind_text(d->st[ST_TRUNCATE], 1, job_id(j), -1, SQLITE_STATIC));
        BIND(d, sqlite3_bind_int64(d->st[ST_TRUNCATE], 2, job_iterations_done(j)));
        return run(d, ST_TRUNCATE, e) || upsert_job(d, j, e) ? e->code : 0;
    }
    case JOB_EV_CHECKPOINT: {
        uint64_t epoch = 0;
        const char *path = NULL;
        int64_t it = job_latest_checkpoint(j, &epoch, &path);
        sqlite3_stmt *s = d->st[ST_INSERT_CKPT];
        BIND(d, sqlite3_bind_text(s, 1, job_id(j), -1, SQLITE_STATIC));
        BIND(d, sqlite3_bind_int64(s, 2, it));
        BIND(d, sqlite3_bind_int64(s, 3, (sqlite3_int64)epoch));
        BIND(d, sqlite3_bind_text(s, 4, path, -1, SQLITE_STATIC));
        BIND(d, sqlite3_bind_double(s, 5, job_now()));
        if (run(d, ST_INSERT_CKPT, e) || doom_older(d, job_id(j), it, e))
            return e->code;
        BIND(d, sqlite3_bind_text(d->st[ST_OLD_CKPTS], 1, job_id(j), -1, SQLITE_STATIC));
        BIND(d, sqlite3_bind_int64(d->st[ST_OLD_CKPTS], 2, it));
        return run(d, ST_OLD_CKPTS, e);
    }
    case JOB_EV_REMOVED:
        remove_checkpoint_files(d, job_id(j));
        BIND(d, sqlite3_bind_text(d->st[ST_DELETE_JOB], 1, job_id(j), -1, SQLITE_STATIC));
        return run(d, ST_DELETE_JOB, e);
    case JOB_EV_METRICS:
        break;
    }
    return 0;
}

/* The registry's observer: metrics rows wait for a batch; anything else is written now, after them. */
static void on_job_event(void *ctx, enum job_event ev, const struct job *j, const struct metrics_row *row)
{
    struct db *d = ctx;
    struct err e = {0};
    if (ev == JOB_EV_METRICS) {
        if (d->n_rows == DB_FLUSH_ROWS)
            db_flush(d, &e);
        d->rows[d->n_rows].row = *row;
        memcpy(d->rows[d->n_rows].job_id, job_id(j), 17);
        d->n_rows++;
        return;
    }
    int rc = begin(d, &e);
    if (!rc)
        rc = end(d, write_rows(d, &e) || write_event(d, ev, j, &e) ? e.code : 0, &e);
    d->n_rows = 0;
    bury(d, rc == 0);
    if (rc)
        log_error("job %s: could not record the change: %s", job_id(j), e.msg);
}

void db_attach(struct db *d, struct job_registry *r)
{
    job_registry_set_observer(r, on_job_event, d);
}

/* Loading ------------------------------------------------------------------------------------ */

static double col_real(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}

static const char *col_text(sqlite3_stmt *s, int i)
{
    return (const char *)sqlite3_column_text(s, i);
}

static int load_metrics(struct db *d, struct job *j, struct err *e)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(d->conn,
        "SELECT iteration, time, loss, seconds_per_iteration, samples_per_second,"
        " data_wait_seconds, grad_norm, lr, eval_loss FROM metrics WHERE job_id = ? AND kind = 'train'"
        " ORDER BY iteration", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return sql_fail(d, rc, "loading metrics", e);
    BIND(d, sqlite3_bind_text(s, 1, job_id(j), -1, SQLITE_STATIC));
    rc = bound(d);
    for (bool ok = rc == SQLITE_OK; ok && (rc = sqlite3_step(s)) == SQLITE_ROW;) {
        struct metrics_row row;
        row.v[METRIC_ITERATION] = (double)sqlite3_column_int64(s, 0);
        for (int c = 1; c < METRIC_NCOLS; c++)
            row.v[c] = col_real(s, c);
        if (job_restore_metrics(j, &row, e))
            break;
    }
    sqlite3_finalize(s);
    if (e->code)
        return e->code;
    return rc == SQLITE_DONE ? 0 : sql_fail(d, rc, "loading metrics", e);
}

static int load_checkpoint(struct db *d, struct job *j, struct err *e)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(d->conn,
        "SELECT iteration, epoch, path FROM checkpoints WHERE job_id = ?"
        " ORDER BY iteration DESC LIMIT 1", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return sql_fail(d, rc, "loading checkpoints", e);
    BIND(d, sqlite3_bind_text(s, 1, job_id(j), -1, SQLITE_STATIC));
    rc = bound(d);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    int out = 0;
    if (rc == SQLITE_ROW)
        out = job_restore_checkpoint(j, sqlite3_column_int64(s, 0),
                                     (uint64_t)sqlite3_column_int64(s, 1), col_text(s, 2), e);
    else if (rc != SQLITE_DONE)
        out = sql_fail(d, rc, "loading checkpoints", e);
    sqlite3_finalize(s);
    return out;
}

/* One row of jobs into r; a row this build cannot read is skipped with a warning, not fatal. */
static int load_job(struct db *d, sqlite3_stmt *s, struct job_registry *r, struct err *e)
{
    const char *id = col_text(s, 0);
    enum job_state state;
    json_error_t jerr;
    json_t *sj = json_loads(col_text(s, 2) ? col_text(s, 2) : "", 0, &jerr);
    struct job_spec *spec = NULL;
    struct spec_error se;
    if (!id || !col_text(s, 1) || job_state_parse(col_text(s, 1), &state) || !sj ||
        spec_parse(sj, &spec, &se)) {
        log_warn("state database: job %s cannot be read by this build; skipped", id ? id : "?");
        json_decref(sj);
        return 0;
    }
    json_decref(sj);
    struct job_params *params = NULL;
    if (col_text(s, 10) && !(params = params_parse(col_text(s, 10))))
        log_warn("state database: job %s: its parameters cannot be read", id);
    struct job_record rec = {
        .id = id, .state = state, .spec = spec, .device = col_text(s, 3),
        .created_at = col_real(s, 4), .started_at = col_real(s, 5), .finished_at = col_real(s, 6),
        .iterations_done = sqlite3_column_int64(s, 7), .error_code = sqlite3_column_int(s, 8),
        .error_message = col_text(s, 9), .params = params,
    };
    if (!isfinite(rec.created_at)) rec.created_at = 0;
    if (!isfinite(rec.started_at)) rec.started_at = 0;
    if (!isfinite(rec.finished_at)) rec.finished_at = 0;
    struct job *j = job_registry_restore(r, &rec, e);
    if (!j && e->code != ERR_NOMEM) {
        log_warn("state database: %s; skipped", e->msg);
        err_clear(e);
        return 0;
    }
    if (!j)
        return e->code;
    return load_metrics(d, j, e) || load_checkpoint(d, j, e) ? e->code : 0;
}

int db_load(struct db *d, struct job_registry *r, struct err *e)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(d->conn,
        "SELECT id, state, spec, device, created_at, started_at, finished_at, iterations_done,"
        " error_code, error_message, params FROM jobs ORDER BY seq", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return sql_fail(d, rc, "loading jobs", e);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (load_job(d, s, r, e))
            break;
    sqlite3_finalize(s);
    if (e->code)
        return e->code;
    return rc == SQLITE_DONE ? 0 : sql_fail(d, rc, "loading jobs", e);
}

void db_close(struct db *d)
{
    if (!d)
        return;
    struct err e = {0};
    if (d->conn)
        db_flush(d, &e);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(d->st[i]);
    if (d->conn) {
        int rc = sqlite3_close(d->conn);
        if (rc != SQLITE_OK)
            log_error("sqlite: close: %s", sqlite3_errstr(rc));
    }
    bury(d, false);
    free(d->doomed);
    free(d->rows);
    free(d);
}
