/*
 * history.h — the metrics history (hist_*): a job's rows in blocks of consecutive iterations,
 * 32 bytes a row, each block with a summary (lowest and highest loss, latest evaluation) so a
 * downsampled plot of ten million rows reads a few thousand blocks, not every row.
 */
#ifndef TRAIND_DAEMON_HISTORY_H
#define TRAIND_DAEMON_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sqlite3.h>

#include "err.h"
#include "job.h"

/*
 * A block ends once its encoding would pass HIST_BLOCK_BYTES: SQLite then keeps the record
 * (the block and its summary, about 60 bytes) as 489 bytes in its leaf page and two full
 * 4 KiB overflow pages. Rows are about 30 bytes, so a block holds some 285 of them; never
 * more than HIST_BLOCK_ROWS.
 */
#define HIST_BLOCK_BYTES 8560
#define HIST_BLOCK_ROWS 320

/* The largest encoded block: header, every column per row (lr too), an evaluation on each row. */
#define HIST_BLOCK_MAX (24 + HIST_BLOCK_ROWS * (28 + 5 + 8 + 10))

/* The table the blocks live in, and its summary index (the state database's schema version 2). */
extern const char hist_schema_sql[];

struct hist_block {
    int64_t first;                            /* the iteration of rows[0] */
    int n;
    size_t bytes;                             /* its encoding's length while lr stays the same */
    struct metrics_row rows[HIST_BLOCK_ROWS];
};

/*
 * Encodes rows [0, b->n) of b into out (HIST_BLOCK_MAX bytes); returns the length, or 0 when
 * a row cannot share the block (its time is before the row before it, or 71 minutes past it).
 * Rows must be rounded by job_metrics_round first: then decoding gives them back bit for bit.
 */
size_t hist_encode(const struct hist_block *b, unsigned char *out);
/* Decodes n rows starting at iteration first; 0, or ERR_INVALID_DATA naming what is wrong. */
int hist_decode(const unsigned char *data, size_t len, int64_t first, int n, struct hist_block *b,
                struct err *e);

struct hist;

/* Prepares the history's statements on conn, which must stay open until hist_free. */
int hist_open(sqlite3 *conn, struct hist **out, struct err *e);
void hist_free(struct hist *h);

/*
 * Buffers a row of job_id. A row that follows the job's latest one joins its block (read back
 * from the database once its buffered copy was written); any other row starts a new block.
 */
int hist_append(struct hist *h, const char *job_id, const struct metrics_row *row, struct err *e);
/* Writes every buffered block, inside a transaction the caller holds; the buffer stays. */
int hist_write(struct hist *h, struct err *e);
/* After the caller's transaction committed: the buffer is empty again. */
void hist_committed(struct hist *h);
/* Rows buffered and not yet written. */
size_t hist_pending_rows(const struct hist *h);
/*
 * Rows buffered past this many while nothing can be written (a full disk for a long time) are
 * dropped, oldest block first, so memory stays bounded: about 170 MB.
 */
#define HIST_MAX_PENDING_ROWS ((size_t)1 << 21)
/* Rows dropped so. */
uint64_t hist_dropped_rows(const struct hist *h);
bool hist_pending(const struct hist *h, const char *job_id);

/* Drops job_id's buffered rows at or past iteration from (its history is being cut there). */
void hist_forget(struct hist *h, const char *job_id, int64_t from);
/* Drops job_id's stored rows at or past iteration from (write the buffer first). */
int hist_truncate(struct hist *h, const char *job_id, int64_t from, struct err *e);

/* The job's stored last row (has_last false when none) and latest row with an eval_loss (-1: none). */
int hist_last(struct hist *h, const char *job_id, bool evals, struct metrics_row *last,
              bool *has_last, int64_t *eval_it, double *eval_loss, struct err *e);

/* The stored row of iteration it (*found false when there is none). */
int hist_row_at(struct hist *h, const char *job_id, int64_t it, struct metrics_row *row, bool *found,
                struct err *e);

/*
 * The page GET /jobs/{id}/metrics answers with, as job_metrics_text documents it, from the
 * stored rows (write the buffer first). limit < 0: no limit. Malloc'd text of *len bytes.
 */
char *hist_page_text(struct hist *h, const char *job_id, int64_t since, int64_t limit,
                     int64_t max_points, bool evals, size_t *len, struct err *e);

/*
 * The same page of consecutive rows (no downsampling), rendered a piece at a time as it is read:
 * a page of any length holds HIST_STREAM_BYTES of text while it is sent. limit >= 0.
 */
struct hist_stream;
struct hist_stream *hist_stream_open(struct hist *h, const char *job_id, int64_t since, int64_t limit,
                                     struct err *e);
/* Up to cap bytes of the page's next text into out: their count, 0 at its end, -1 with e set. */
ssize_t hist_stream_read(struct hist_stream *st, char *out, size_t cap, struct err *e);
void hist_stream_free(struct hist_stream *st);
#define HIST_STREAM_ROWS 256
#define HIST_STREAM_BYTES 65536

/*
 * The longest JSON text of one metrics row: "[", 17-digit numbers or null, ",", "]". Pages are
 * written row by row in this text, as jansson would write the same rows.
 */
#define HIST_ROW_TEXT_MAX (METRIC_NCOLS * 26 + 4)
/* Writes row's JSON array text, as jansson would write it, into buf; returns its length. */
size_t hist_row_text(const struct metrics_row *row, char *buf);

/* Deletes up to chunk of job_id's blocks; *deleted says how many there were. */
int hist_purge_chunk(sqlite3 *conn, const char *job_id, int chunk, int *deleted, struct err *e);

#endif
