/* db_load.c — the stored jobs back into the registry at start: the jobs table, latest checkpoints and latest rows. */
#include "db_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

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

static double col_real(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}

static const char *col_text(sqlite3_stmt *s, int i)
{
    return (const char *)sqlite3_column_text(s, i);
}


static int load_checkpoint(struct db *d, struct job *j, struct err *e)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(d->conn,
        "SELECT iteration, epoch, path FROM checkpoints WHERE job_id = ?"
        " ORDER BY iteration DESC LIMIT 1", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return db_sql_fail(d, rc, "loading checkpoints", e);
    BIND(d, sqlite3_bind_text(s, 1, job_id(j), -1, SQLITE_STATIC));
    rc = db_bound(d);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    int out = 0;
    if (rc == SQLITE_ROW)
        out = job_restore_checkpoint(j, sqlite3_column_int64(s, 0),
                                     (uint64_t)sqlite3_column_int64(s, 1), col_text(s, 2), e);
    else if (rc != SQLITE_DONE)
        out = db_sql_fail(d, rc, "loading checkpoints", e);
    sqlite3_finalize(s);
    return out;
}

/* What the job shows of its history: the latest row, the one before its checkpoint, the latest evaluation. */
int db_load_rows(struct db *d, struct job *j, struct err *e)
{
    struct metrics_row last, at_ckpt;
    bool has_last = false, has_ckpt = false;
    int64_t eval_it;
    double eval_loss;
    if (hist_last(d->hist, job_id(j), job_spec(j)->data.test != NULL, &last, &has_last, &eval_it,
                  &eval_loss, e))
        return e->code;
    int64_t ck = job_latest_checkpoint(j, NULL, NULL);
    if (ck > 0 && hist_row_at(d->hist, job_id(j), ck - 1, &at_ckpt, &has_ckpt, e))
        return e->code;
    job_restore_rows(j, has_last ? &last : NULL, has_ckpt ? &at_ckpt : NULL, eval_it, eval_loss);
    return 0;
}

/* A row whose spec or state this build cannot read: listed as failed, never skipped. */
static int load_unreadable(struct job_registry *r, sqlite3_stmt *s, const char *why, struct err *e)
{
    const char *id = col_text(s, 0);
    char msg[512];
    snprintf(msg, sizeof msg, "this traind cannot read the stored job (%s); a newer traind may: "
             "its spec is shown as stored", why);
    log_warn("state database: job %s: %s", id, msg);
    double created = col_real(s, 4);
    struct job *j = job_registry_restore_unreadable(r, id, col_text(s, 11), col_text(s, 12),
                                                    col_text(s, 2), isfinite(created) ? created : 0,
                                                    msg, e);
    if (!j && e->code != ERR_NOMEM) {
        log_warn("state database: %s; skipped", e->msg);
        err_clear(e);
        return 0;
    }
    return j ? 0 : e->code;
}

/* One row of jobs into r. */
static int load_job(struct db *d, sqlite3_stmt *s, struct job_registry *r, struct err *e)
{
    const char *id = col_text(s, 0);
    if (!id)
        return 0;
    enum job_state state;
    json_error_t jerr;
    struct spec_error se = {.field = ""};
    if (!col_text(s, 1) || job_state_parse(col_text(s, 1), &state))
        return load_unreadable(r, s, "its state is not one this build knows", e);
    json_t *sj = json_loads(col_text(s, 2) ? col_text(s, 2) : "", 0, &jerr);
    struct job_spec *spec = NULL;
    if (!sj || spec_parse(sj, &spec, &se)) {
        json_decref(sj);
        char why[400];
        snprintf(why, sizeof why, "%s%s%s", sj ? se.field : "spec", sj && !se.field[0] ? "" : ": ",
                 sj ? se.message : "not valid JSON");
        return load_unreadable(r, s, why, e);
    }
    json_decref(sj);
    struct job_params *params = NULL;
    if (col_text(s, 10) && !(params = params_parse(col_text(s, 10))))
        log_warn("state database: job %s: its parameters cannot be read", id);
    struct job_record rec = {
        .id = id, .state = state, .spec = spec, .device = col_text(s, 3),
        .created_at = col_real(s, 4), .started_at = col_real(s, 5), .finished_at = col_real(s, 6),
        .iterations_done = sqlite3_column_int64(s, 7), .error_code = sqlite3_column_int(s, 8),
        .error_message = col_text(s, 9), .params = params, .warnings = col_text(s, 13),
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
    if (sqlite3_column_type(s, 14) != SQLITE_NULL && sqlite3_column_type(s, 15) != SQLITE_NULL)
        job_set_data_bytes(j, (uint64_t)sqlite3_column_int64(s, 14), (uint64_t)sqlite3_column_int64(s, 15));
    return load_checkpoint(d, j, e) || db_load_rows(d, j, e) ? e->code : 0;
}

int db_load(struct db *d, struct job_registry *r, struct err *e)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(d->conn,
        "SELECT id, state, spec, device, created_at, started_at, finished_at, iterations_done,"
        " error_code, error_message, params, client_id, name, warnings, data_bytes_fetched,"
        " data_bytes_total FROM jobs ORDER BY seq", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return db_sql_fail(d, rc, "loading jobs", e);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (load_job(d, s, r, e))
            break;
    sqlite3_finalize(s);
    if (e->code)
        return e->code;
    return rc == SQLITE_DONE ? 0 : db_sql_fail(d, rc, "loading jobs", e);
}
