/* history_impl.h — struct hist and the helpers history.c (writing) and history_read.c (reading) share. */
#ifndef TRAIND_DAEMON_HISTORY_IMPL_H
#define TRAIND_DAEMON_HISTORY_IMPL_H

#include "history.h"

enum hist_stmt {
    HST_PUT, HST_LAST_BLOCK, HST_BLOCK_AT, HST_DROP_FROM, HST_SUMMARIES, HST_LAST_EVAL, HST_COUNT
};

/* A block of one job's rows not yet written. */
struct hist_open {
    char job_id[17];
    struct hist_block b;
};

struct hist {
    sqlite3 *conn;
    sqlite3_stmt *st[HST_COUNT];
    struct hist_open **open;           /* in the order the blocks were started */
    size_t n_open, cap_open;
    size_t pending_rows;
    uint64_t dropped_rows;             /* lost to HIST_MAX_PENDING_ROWS */
};

int hist_fail(struct hist *h, int rc, const char *what, struct err *e);
void hist_reset(sqlite3_stmt *s);
/* The block holding iteration it (HST_BLOCK_AT) or the job's latest (HST_LAST_BLOCK); *found false when none. */
int hist_read_block(struct hist *h, enum hist_stmt which, const char *job_id, int64_t it,
                    struct hist_block *b, bool *found, struct err *e);

#endif
