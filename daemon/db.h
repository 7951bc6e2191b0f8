/* db.h — persistence (db_*): jobs, their metrics history and checkpoint records in SQLite under --state-dir. */
#ifndef TRAIND_DAEMON_DB_H
#define TRAIND_DAEMON_DB_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "err.h"
#include "job.h"

/* The schema this build writes (PRAGMA user_version); older databases are migrated up. */
#define DB_SCHEMA_VERSION 3

/* Metrics rows are written once this many wait (or at every flush tick). */
#define DB_FLUSH_ROWS 1024

struct db;

/*
 * Creates state_dir (mode 0700) if missing and opens state_dir/traind.db: WAL,
 * synchronous=NORMAL, a busy timeout, foreign keys; migrates the schema. One connection,
 * used by one thread (the loop thread) only, and a second one on a thread of its own that
 * deletes the history of deleted jobs in small transactions.
 */
int db_open(const char *state_dir, struct db **out, struct err *e);
/* Flushes what is owed, then closes. */
void db_close(struct db *d);

/*
 * Rebuilds every stored job into r (call before db_attach): the jobs table, each job's latest
 * checkpoint and latest row; never the whole history, which stays on disk. A row this build
 * cannot read is restored as failed with error.code "unreadable_spec" (job_unreadable).
 */
int db_load(struct db *d, struct job_registry *r, struct err *e);

/*
 * From now on every change to r's jobs is written: a new job at once (job_registry_add fails
 * when it cannot be), metrics rows in batches, anything else at once. A change that cannot be
 * written is kept and tried again at every flush until it is.
 */
void db_attach(struct db *d, struct job_registry *r);

/* Writes what is owed (changes and buffered rows) in one transaction; kept on failure. */
int db_flush(struct db *d, struct err *e);
size_t db_pending_rows(const struct db *d);

const char *db_state_dir(const struct db *d);

/*
 * {"columns":[...],"rows":[[...]],"next_since":N} and a newline, as the API sends it (compact,
 * reals with 17 significant digits): j's rows with iteration >= since, at most limit (limit < 0:
 * all of them). With max_points >= 4 and more rows than that, the rows are cut into
 * max_points/4 buckets and each keeps its first, last, lowest-loss and highest-loss row; for a
 * job with data.test, max_points/5 buckets that also keep their latest row with an eval_loss.
 * Read from the database a block at a time, whole blocks of a bucket from their summaries.
 * Malloc'd, *len bytes; NULL with e set.
 */
char *db_metrics_text(struct db *d, const struct job *j, int64_t since, int64_t limit,
                      int64_t max_points, size_t *len, struct err *e);
/*
 * The same page without max_points, as a stream (hist_stream_read, hist_stream_free) that renders
 * it a piece at a time while it is sent; NULL with e set.
 */
struct hist_stream *db_metrics_stream(struct db *d, const struct job *j, int64_t since, int64_t limit,
                                      struct err *e);
/* The same, parsed; NULL on failure. */
json_t *db_metrics_to_json(struct db *d, const struct job *j, int64_t since, int64_t limit,
                           int64_t max_points);

/* What GET /metrics shows of the state database. */
struct db_stats {
    uint64_t file_bytes;       /* traind.db: pages in use and free */
    uint64_t free_bytes;       /* free pages (a deleted job's), reused before the file grows */
    uint64_t wal_bytes;        /* traind.db-wal */
    uint64_t write_errors;     /* transactions that failed (each is retried) */
    uint64_t owed_changes;     /* job changes not yet written */
    uint64_t pending_rows;     /* metrics rows not yet written */
    uint64_t dropped_rows;     /* metrics rows lost after waiting too long to be written */
};
void db_stats(struct db *d, struct db_stats *out);

#endif
