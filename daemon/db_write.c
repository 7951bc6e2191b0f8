/* db_write.c — the registry's changes into SQLite: one transaction a flush, kept and retried until it commits. */
#include "db_impl.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

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
    char *warnings = NULL;
    if (job_warnings(j) && !(warnings = json_dumps(job_warnings(j), JSON_COMPACT | JSON_REAL_PRECISION(17)))) {
        free(spec);
        free(params);
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
    bind_text_or_null(d, s, 15, warnings);
    uint64_t fetched, total;
    if (job_data_bytes(j, &fetched, &total)) {
        BIND(d, sqlite3_bind_int64(s, 16, (sqlite3_int64)fetched));
        BIND(d, sqlite3_bind_int64(s, 17, (sqlite3_int64)total));
    } else {
        BIND(d, sqlite3_bind_null(s, 16));
        BIND(d, sqlite3_bind_null(s, 17));
    }
    int rc = db_run(d, ST_UPSERT_JOB, e);
    free(spec);
    free(params);
    free(warnings);
    return rc;
}

/* Notes the files of job_id's checkpoints (before iteration it, or all when it < 0) to remove after the commit. */
static int doom_checkpoints(struct db *d, const char *job_id, int64_t it, struct err *e)
{
    enum stmt_id id = it < 0 ? ST_CKPT_PATHS : ST_OLD_CKPT_PATHS;
    sqlite3_stmt *s = d->st[id];
    BIND(d, sqlite3_bind_text(s, 1, job_id, -1, SQLITE_STATIC));
    if (it >= 0)
        BIND(d, sqlite3_bind_int64(s, 2, it));
    int rc = db_bound(d);
    for (bool ok = rc == SQLITE_OK; ok && (rc = sqlite3_step(s)) == SQLITE_ROW;) {
        const char *path = (const char *)sqlite3_column_text(s, 0);
        if (d->n_doomed == d->cap_doomed) {
            size_t cap = d->cap_doomed ? 2 * d->cap_doomed : 8;
            char **v = realloc(d->doomed, cap * sizeof *v);
            if (!v) {
                rc = SQLITE_NOMEM;
                break;
            }
            d->doomed = v;
            d->cap_doomed = cap;
        }
        if (path && (d->doomed[d->n_doomed] = strdup(path)))
            d->n_doomed++;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc == SQLITE_DONE ? 0 : db_sql_fail(d, rc, "listing checkpoints", e);
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

/* A deleted job's checkpoint directory, with anything a crash left in it (best effort, logged). */
static void remove_checkpoint_dir(struct db *d, const char *job_id)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/checkpoints/%s", d->dir, job_id);
    DIR *dh = opendir(dir);
    struct dirent *de;
    while (dh && (de = readdir(dh))) {
        char path[4500];
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
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

static int write_checkpoint(struct db *d, const struct job *j, struct err *e)
{
    uint64_t epoch = 0;
    const char *path = NULL;
    int64_t it = job_latest_checkpoint(j, &epoch, &path);
    if (it < 0)
        return 0;
    sqlite3_stmt *s = d->st[ST_INSERT_CKPT];
    BIND(d, sqlite3_bind_text(s, 1, job_id(j), -1, SQLITE_STATIC));
    BIND(d, sqlite3_bind_int64(s, 2, it));
    BIND(d, sqlite3_bind_int64(s, 3, (sqlite3_int64)epoch));
    BIND(d, sqlite3_bind_text(s, 4, path, -1, SQLITE_STATIC));
    BIND(d, sqlite3_bind_double(s, 5, job_now()));
    if (db_run(d, ST_INSERT_CKPT, e) || doom_checkpoints(d, job_id(j), it, e))
        return e->code;
    BIND(d, sqlite3_bind_text(d->st[ST_OLD_CKPTS], 1, job_id(j), -1, SQLITE_STATIC));
    BIND(d, sqlite3_bind_int64(d->st[ST_OLD_CKPTS], 2, it));
    return db_run(d, ST_OLD_CKPTS, e);
}

/* One job's debt, in the order removal, truncation, row, checkpoint (the checkpoint needs the row). */
static int write_owed(struct db *d, const struct owed *o, struct err *e)
{
    if (o->what & OWE_REMOVE) {
        if (doom_checkpoints(d, o->id, -1, e))
            return e->code;
        BIND(d, sqlite3_bind_text(d->st[ST_DELETE_JOB], 1, o->id, -1, SQLITE_STATIC));
        return db_run(d, ST_DELETE_JOB, e);
    }
    if ((o->what & OWE_TRUNCATE) && hist_truncate(d->hist, o->id, o->truncate_from, e))
        return e->code;
    const struct job *j = d->reg ? job_registry_find(d->reg, o->id) : NULL;
    if (!j)
        return 0;
    if ((o->what & OWE_ROW) && upsert_job(d, j, e))
        return e->code;
    return (o->what & OWE_CHECKPOINT) ? write_checkpoint(d, j, e) : 0;
}

/* Notes a change of job_id; two changes of the same kind are one. */
static int owe(struct db *d, const char *job_id, unsigned what, int64_t truncate_from, struct err *e)
{
    struct owed *o = NULL;
    for (size_t i = 0; i < d->n_owed && !o; i++)
        if (strcmp(d->owed[i].id, job_id) == 0)
            o = &d->owed[i];
    if (!o) {
        if (d->n_owed == d->cap_owed) {
            size_t cap = d->cap_owed ? 2 * d->cap_owed : 16;
            struct owed *v = realloc(d->owed, cap * sizeof *v);
            if (!v)
                return err_set(e, ERR_NOMEM, "db: out of memory noting a change of job %s", job_id);
            d->owed = v;
            d->cap_owed = cap;
        }
        o = &d->owed[d->n_owed++];
        *o = (struct owed){.truncate_from = INT64_MAX};
        memcpy(o->id, job_id, sizeof o->id);
    }
    if ((what & OWE_TRUNCATE) && truncate_from < o->truncate_from)
        o->truncate_from = truncate_from;
    o->what |= what;
    return 0;
}

static void forget_owed(struct db *d, const char *job_id)
{
    for (size_t i = 0; i < d->n_owed; i++)
        if (strcmp(d->owed[i].id, job_id) == 0) {
            d->owed[i] = d->owed[--d->n_owed];
            return;
        }
}

/* What follows a commit: files and history of deleted jobs go, nothing is owed any more. */
static void settled(struct db *d)
{
    bury(d, true);
    for (size_t i = 0; i < d->n_owed; i++)
        if (d->owed[i].what & OWE_REMOVE) {
            remove_checkpoint_dir(d, d->owed[i].id);
            db_purge_add(d->purge, d->owed[i].id);
        }
    d->n_owed = 0;
    hist_committed(d->hist);
    if (d->failing)
        log_info("the state database is written again");
    d->failing = false;
}

int db_flush(struct db *d, struct err *e)
{
    if (!d || (d->n_owed == 0 && hist_pending_rows(d->hist) == 0))
        return 0;
    int rc = db_run(d, ST_BEGIN, e);
    for (size_t i = 0; !rc && i < d->n_owed; i++)
        rc = write_owed(d, &d->owed[i], e);
    if (!rc)
        rc = hist_write(d->hist, e);
    if (!rc)
        rc = db_run(d, ST_COMMIT, e);
    if (!rc) {
        settled(d);
        return 0;
    }
    struct err ignored = {0};
    if (!sqlite3_get_autocommit(d->conn))
        db_run(d, ST_ROLLBACK, &ignored);
    bury(d, false);
    d->write_errors++;
    /* Everything stays owed and is tried again at the next flush; said once until it works. */
    if (!d->failing)
        log_error("cannot write the state database (%zu job change%s and %zu metrics rows wait; "
                  "retrying): %s", d->n_owed, d->n_owed == 1 ? "" : "s", hist_pending_rows(d->hist), e->msg);
    d->failing = true;
    return rc;
}

/* The registry's observer: rows wait for a flush, anything else is flushed at once. */
static int on_job_event(void *ctx, enum job_event ev, const struct job *j, const struct metrics_row *row,
                        struct err *e)
{
    struct db *d = ctx;
    const char *id = job_id(j);
    int rc = 0;
    switch (ev) {
    case JOB_EV_METRICS:
        if ((rc = hist_append(d->hist, id, row, e)))
            break;
        if (hist_pending_rows(d->hist) >= DB_FLUSH_ROWS && !d->failing)
            db_flush(d, e);
        return 0;
    case JOB_EV_ADDED:
        if ((rc = owe(d, id, OWE_ROW, 0, e)))
            break;
        /* 201 means committed: a job the database did not take is not added. */
        if ((rc = db_flush(d, e)))
            forget_owed(d, id);
        return rc;
    case JOB_EV_CHANGED: rc = owe(d, id, OWE_ROW, 0, e); break;
    case JOB_EV_CHECKPOINT: rc = owe(d, id, OWE_CHECKPOINT, 0, e); break;
    case JOB_EV_TRUNCATED:
        hist_forget(d->hist, id, job_iterations_done(j));
        rc = owe(d, id, OWE_TRUNCATE | OWE_ROW, job_iterations_done(j), e);
        break;
    case JOB_EV_REMOVED:
        hist_forget(d->hist, id, 0);
        rc = owe(d, id, OWE_REMOVE, 0, e);
        break;
    }
    if (rc) {
        d->write_errors++;
        log_error("job %s: a change is not recorded: %s", id, e->msg);
        return rc;
    }
    struct err ignored = {0};
    /* Logs its own failures; what failed stays owed. */
    if (db_flush(d, &ignored) == 0 && ev == JOB_EV_TRUNCATED) {
        /* The job shows the history's latest row again: the one before where it goes on. */
        struct job *mj = job_registry_find(d->reg, id);
        if (mj && db_load_rows(d, mj, &ignored))
            log_warn("job %s: reading its latest row: %s", id, ignored.msg);
    }
    return 0;
}

void db_attach(struct db *d, struct job_registry *r)
{
    d->reg = r;
    job_registry_set_observer(r, on_job_event, d);
}

char *db_metrics_text(struct db *d, const struct job *j, int64_t since, int64_t limit,
                      int64_t max_points, size_t *len, struct err *e)
{
    return hist_page_text(d->hist, job_id(j), since, limit, max_points,
                          job_spec(j)->data.test != NULL, len, e);
}

struct hist_stream *db_metrics_stream(struct db *d, const struct job *j, int64_t since, int64_t limit,
                                      struct err *e)
{
    return hist_stream_open(d->hist, job_id(j), since, limit, e);
}

json_t *db_metrics_to_json(struct db *d, const struct job *j, int64_t since, int64_t limit,
                           int64_t max_points)
{
    size_t len;
    struct err e = {0};
    char *text = db_metrics_text(d, j, since, limit, max_points, &len, &e);
    json_t *o = text ? json_loadb(text, len, 0, NULL) : NULL;
    free(text);
    return o;
}

void db_stats(struct db *d, struct db_stats *out)
{
    memset(out, 0, sizeof *out);
    out->write_errors = d->write_errors;
    out->owed_changes = d->n_owed;
    out->pending_rows = hist_pending_rows(d->hist);
    out->dropped_rows = hist_dropped_rows(d->hist);
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(d->conn, "SELECT page_count * page_size, freelist_count * page_size"
                                    " FROM pragma_page_count, pragma_page_size, pragma_freelist_count",
                           -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW) {
            out->file_bytes = (uint64_t)sqlite3_column_int64(s, 0);
            out->free_bytes = (uint64_t)sqlite3_column_int64(s, 1);
        }
        sqlite3_finalize(s);
    }
    char wal[4300];
    snprintf(wal, sizeof wal, "%s-wal", d->path);
    struct stat st;
    if (stat(wal, &st) == 0)
        out->wal_bytes = (uint64_t)st.st_size;
}

void db_close(struct db *d)
{
    if (!d)
        return;
    db_purge_stop(d->purge);
    d->purge = NULL;   /* what the last flush deletes is purged at the next start */
    struct err e = {0};
    if (d->conn && d->hist)
        db_flush(d, &e);
    if (d->n_owed || (d->hist && hist_pending_rows(d->hist)))
        log_error("closing the state database with %zu job change%s unwritten", d->n_owed,
                  d->n_owed == 1 ? "" : "s");
    hist_free(d->hist);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(d->st[i]);
    if (d->conn) {
        int rc = sqlite3_close(d->conn);
        if (rc != SQLITE_OK)
            log_error("sqlite: close: %s", sqlite3_errstr(rc));
    }
    bury(d, false);
    free(d->doomed);
    free(d->owed);
    free(d);
}
