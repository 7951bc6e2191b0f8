/* db_impl.h — struct db and the helpers db.c (writing), db_load.c (loading) and db_purge.c share. */
#ifndef TRAIND_DAEMON_DB_IMPL_H
#define TRAIND_DAEMON_DB_IMPL_H

#include <sqlite3.h>
#include <stdbool.h>

#include "db.h"
#include "history.h"

enum stmt_id {
    ST_BEGIN, ST_COMMIT, ST_ROLLBACK, ST_UPSERT_JOB, ST_DELETE_JOB, ST_INSERT_CKPT,
    ST_OLD_CKPT_PATHS, ST_OLD_CKPTS, ST_CKPT_PATHS, ST_COUNT
};

/* What a job still owes the database: set when a change happens, cleared once it is committed. */
enum {
    OWE_ROW = 1,          /* the jobs row (state, device, times, error, parameters) */
    OWE_TRUNCATE = 2,     /* history rows at or past truncate_from go */
    OWE_CHECKPOINT = 4,   /* the latest checkpoint's record */
    OWE_REMOVE = 8,       /* the job was deleted: its row goes and its history is purged */
};

struct owed {
    char id[17];
    unsigned what;
    int64_t truncate_from;
};

struct db_purge;

struct db {
    sqlite3 *conn;
    struct hist *hist;
    struct job_registry *reg;          /* the attached registry */
    int bind_rc;                       /* first failed sqlite3_bind_* since the last step */
    char **doomed;                     /* checkpoint files to remove once the transaction commits */
    size_t n_doomed, cap_doomed;
    sqlite3_stmt *st[ST_COUNT];
    char dir[4096];
    char path[4200];
    struct owed *owed;                 /* changes not yet committed, in the order they happened */
    size_t n_owed, cap_owed;
    uint64_t write_errors;             /* transactions that failed */
    bool failing;                      /* the last write failed (logged once until one succeeds) */
    struct db_purge *purge;
};

int db_sql_fail(struct db *d, int rc, const char *what, struct err *e);
/* Binds are checked once, at the step: the first failing one is kept and db_run reports it. */
#define BIND(d, call) do { int brc_ = (call); if (brc_ != SQLITE_OK && !(d)->bind_rc) (d)->bind_rc = brc_; } while (0)
/* Runs a statement that returns no rows, then resets it. */
int db_run(struct db *d, enum stmt_id id, struct err *e);
/* SQLITE_OK, or the failed bind's code, cleared (for statements stepped by hand). */
int db_bound(struct db *d);

/* What j shows of its stored history: its latest row, the one before its checkpoint, its latest evaluation. */
int db_load_rows(struct db *d, struct job *j, struct err *e);

/* The background deletion of deleted jobs' history, on a connection of its own (db_purge.c). */
int db_purge_start(const char *path, struct db_purge **out, struct err *e);
void db_purge_add(struct db_purge *p, const char *job_id);
/* Stops after the chunk under way; what is left is found again at the next start. */
void db_purge_stop(struct db_purge *p);

#endif
