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

/* A stored block's rows as JSON text, rendered once: pages of consecutive rows copy it. */
struct hist_text {
    char job_id[17];                   /* "" when the slot is free */
    int64_t first;
    int n;
    uint64_t used;                     /* when it was last read, for least-recently-used reuse */
    char *text;
    uint32_t *off;                     /* row i is text[off[i] .. off[i + 1]) */
};

/* Rendered blocks kept: about 11 MB of text, 70,000 rows. */
#define HIST_TEXT_CACHED 256

/* A stored block's summary, as its row in the summary index has it. */
struct hist_sum {
    int64_t first;
    int n;
    double min_loss, max_loss;          /* NaN where every loss of the block is */
    int64_t min_at, max_at, eval_at;    /* iterations; eval_at -1: no evaluation */
};

/*
 * A job's stored summaries, read once and then only from the last one on (it may have grown,
 * and blocks are only added after it): a plot of a long job scans memory, not the index.
 */
struct hist_sums {
    char job_id[17];                   /* "" when the slot is free */
    struct hist_sum *s;
    size_t n, cap;
    uint64_t used;
};

/* Jobs whose summaries are kept: about 2.5 MB for ten million rows each. */
#define HIST_SUMS_CACHED 4

struct hist {
    sqlite3 *conn;
    sqlite3_stmt *st[HST_COUNT];
    struct hist_open **open;           /* in the order the blocks were started */
    size_t n_open, cap_open;
    size_t pending_rows;
    uint64_t dropped_rows;             /* lost to HIST_MAX_PENDING_ROWS */
    struct hist_text text[HIST_TEXT_CACHED];
    struct hist_sums sums[HIST_SUMS_CACHED];
    uint64_t ticks;
};

/* The rows of b with the lowest and highest loss (NaN loses to any number; ties: the earliest) and the latest evaluation (-1: none). */
void hist_summarize(const struct hist_block *b, int *lowest, int *highest, int *eval);
/* Forgets what is kept of job_id's stored blocks, text and summaries (they are about to change). */
void hist_cache_forget(struct hist *h, const char *job_id);

int hist_fail(struct hist *h, int rc, const char *what, struct err *e);
void hist_reset(sqlite3_stmt *s);
/* The block holding iteration it (HST_BLOCK_AT) or the job's latest (HST_LAST_BLOCK); *found false when none. */
int hist_read_block(struct hist *h, enum hist_stmt which, const char *job_id, int64_t it,
                    struct hist_block *b, bool *found, struct err *e);

#endif
