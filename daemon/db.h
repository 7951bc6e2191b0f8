/* db.h — persistence (db_*): jobs, metrics and checkpoint records in SQLite under --state-dir. */
#ifndef TRAIND_DAEMON_DB_H
#define TRAIND_DAEMON_DB_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "job.h"

/* The schema this build writes (PRAGMA user_version); older databases are migrated up. */
#define DB_SCHEMA_VERSION 1

/* Metrics rows are written in batches of at most this many (or every flush tick). */
#define DB_FLUSH_ROWS 1024

struct db;

/*
 * Creates state_dir (mode 0700) if missing and opens state_dir/traind.db: WAL,
 * synchronous=NORMAL, a busy timeout, foreign keys; migrates the schema. One
 * connection, used by one thread (the loop thread) only.
 */
int db_open(const char *state_dir, struct db **out, struct err *e);
/* Flushes what is buffered, then closes. */
void db_close(struct db *d);

/* Rebuilds every stored job, its metrics and latest checkpoint into r (call before db_attach). */
int db_load(struct db *d, struct job_registry *r, struct err *e);

/* From now on every change to r's jobs is written (metrics rows batched, the rest at once). */
void db_attach(struct db *d, struct job_registry *r);

/* Writes the buffered metrics rows in one transaction. */
int db_flush(struct db *d, struct err *e);
size_t db_pending_rows(const struct db *d);

const char *db_state_dir(const struct db *d);

#endif
