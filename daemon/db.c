/* db.c — SQLite persistence: schema and migrations, and the registry's changes written in transactions that are retried until they commit. */
#include "db_impl.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "log.h"

#define DB_BUSY_TIMEOUT_MS 5000

static const char schema_v1[] =
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
    "  kind TEXT NOT NULL DEFAULT 'train',"
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
    "  PRIMARY KEY (job_id, iteration));";

/* Version 2: a row an iteration (about 150 bytes) becomes 32 bytes in blocks (history.c). */
static int metrics_to_blocks(struct db *d, struct err *e)
{
    char *msg = NULL;
    if (sqlite3_exec(d->conn, hist_schema_sql, NULL, NULL, &msg) != SQLITE_OK) {
        err_set(e, ERR_IO, "sqlite: %s", msg ? msg : "creating metrics_blocks");
        sqlite3_free(msg);
        return e->code;
    }
    struct hist *h;
    sqlite3_stmt *s;
    if (hist_open(d->conn, &h, e))
        return e->code;
    int rc = sqlite3_prepare_v2(d->conn,
        "SELECT job_id, iteration, time, loss, seconds_per_iteration, samples_per_second,"
        " data_wait_seconds, grad_norm, lr, eval_loss FROM metrics WHERE kind = 'train'"
        " ORDER BY job_id, iteration", -1, &s, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        const char *id = (const char *)sqlite3_column_text(s, 0);
        if (!id || strlen(id) != 16)
            continue;
        struct metrics_row row;
        row.v[METRIC_ITERATION] = (double)sqlite3_column_int64(s, 1);
        for (int c = 1; c < METRIC_NCOLS; c++)
            row.v[c] = sqlite3_column_type(s, c + 1) == SQLITE_NULL ? NAN : sqlite3_column_double(s, c + 1);
        job_metrics_round(&row);
        if (hist_append(h, id, &row, e) ||
            (hist_pending_rows(h) >= 65536 && hist_write(h, e)))
            break;
        if (hist_pending_rows(h) >= 65536)
            hist_committed(h);   /* written in this transaction: the buffer can go */
    }
    sqlite3_finalize(s);
    if (!e->code && rc != SQLITE_DONE)
        db_sql_fail(d, rc, "reading the old metrics", e);
    if (!e->code)
        hist_write(h, e);
    hist_free(h);
    if (!e->code && sqlite3_exec(d->conn, "DROP TABLE metrics", NULL, NULL, &msg) != SQLITE_OK) {
        err_set(e, ERR_IO, "sqlite: %s", msg ? msg : "dropping metrics");
        sqlite3_free(msg);
    }
    return e->code;
}

/* Version 3: the training data a job's run read, and its size (GET /jobs/{id}'s data; NULL: none yet). */
static const char schema_v3[] =
    "ALTER TABLE jobs ADD COLUMN warnings TEXT;"   /* JSON array (job_warnings) */
    "ALTER TABLE jobs ADD COLUMN data_bytes_fetched INTEGER;"
    "ALTER TABLE jobs ADD COLUMN data_bytes_total INTEGER;";

/* Each entry takes the schema from version i to i + 1; never edit one that has shipped. */
static const struct migration {
    const char *sql;
    int (*run)(struct db *d, struct err *e);
} migrations[] = {
    {schema_v1, NULL},
    {NULL, metrics_to_blocks},
    {schema_v3, NULL},
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_UPSERT_JOB] =
        "INSERT INTO jobs (id, client_id, name, state, priority, spec, device, created_at,"
        " started_at, finished_at, iterations_done, error_code, error_message, params, warnings,"
        " data_bytes_fetched, data_bytes_total)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
        " ON CONFLICT (id) DO UPDATE SET state = ?4, device = ?7, started_at = ?9,"
        " finished_at = ?10, iterations_done = ?11, error_code = ?12, error_message = ?13,"
        " params = ?14, warnings = ?15, data_bytes_fetched = ?16, data_bytes_total = ?17",
    [ST_DELETE_JOB] = "DELETE FROM jobs WHERE id = ?",
    [ST_INSERT_CKPT] =
        "INSERT OR REPLACE INTO checkpoints (job_id, iteration, epoch, path, created)"
        " VALUES (?, ?, ?, ?, ?)",
    /* Only the latest file is kept: older ones go once the new one is recorded. */
    [ST_OLD_CKPT_PATHS] = "SELECT path FROM checkpoints WHERE job_id = ? AND iteration < ?",
    [ST_OLD_CKPTS] = "DELETE FROM checkpoints WHERE job_id = ? AND iteration < ?",
    [ST_CKPT_PATHS] = "SELECT path FROM checkpoints WHERE job_id = ?",
};

int db_sql_fail(struct db *d, int rc, const char *what, struct err *e)
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
        return db_sql_fail(d, rc, "user_version", e);
    rc = sqlite3_step(s);
    *out = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? 0 : db_sql_fail(d, rc, "user_version", e);
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
        const struct migration *m = &migrations[v];
        if ((m->sql && exec_sql(d, m->sql, e)) || (m->run && m->run(d, e)) || exec_sql(d, set, e)) {
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

/* WAL + NORMAL: a crash loses at most the last transactions, never the database. */
static int configure(struct db *d, struct err *e)
{
    int rc = sqlite3_busy_timeout(d->conn, DB_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK)
        return db_sql_fail(d, rc, "busy_timeout", e);
    /* Checkpoints (the only fsyncs) every 16 MiB of log rather than 4, so a job of tiny batches
     * stalls the loop thread less often. */
    if (exec_sql(d, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
                    " PRAGMA foreign_keys = ON; PRAGMA wal_autocheckpoint = 4096;", e) ||
        migrate(d, e))
        return err_prefix(e, "%s", d->path);
    for (int i = 0; i < ST_COUNT; i++)
        if ((rc = sqlite3_prepare_v3(d->conn, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &d->st[i],
                                     NULL)) != SQLITE_OK)
            return db_sql_fail(d, rc, stmt_sql[i], e);
    return hist_open(d->conn, &d->hist, e) || db_purge_start(d->path, &d->purge, e) ? e->code : 0;
}

int db_open(const char *state_dir, struct db **out, struct err *e)
{
    struct db *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(e, ERR_NOMEM, "db: out of memory");
    snprintf(d->dir, sizeof d->dir, "%s", state_dir);
    snprintf(d->path, sizeof d->path, "%s/traind.db", state_dir);
    if (fs_mkdirs(state_dir, e)) {
        db_close(d);
        return e->code;
    }
    int rc = sqlite3_open_v2(d->path, &d->conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                             SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        err_set(e, ERR_IO, "cannot open %s: %s", d->path, d->conn ? sqlite3_errmsg(d->conn) : sqlite3_errstr(rc));
        db_close(d);
        return e->code;
    }
    if (configure(d, e)) {
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
    return hist_pending_rows(d->hist);
}

int db_run(struct db *d, enum stmt_id id, struct err *e)
{
    if (d->bind_rc) {
        int brc = d->bind_rc;
        d->bind_rc = 0;
        sqlite3_clear_bindings(d->st[id]);
        return db_sql_fail(d, brc, stmt_sql[id], e);
    }
    int rc = sqlite3_step(d->st[id]);
    sqlite3_reset(d->st[id]);
    sqlite3_clear_bindings(d->st[id]);
    if (rc != SQLITE_DONE)
        return db_sql_fail(d, rc, stmt_sql[id], e);
    return 0;
}

int db_bound(struct db *d)
{
    int brc = d->bind_rc;
    d->bind_rc = 0;
    return brc;
}
