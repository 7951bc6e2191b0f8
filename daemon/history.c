/* history.c — metrics blocks: their encoding, the buffer of unwritten rows, truncation and purging. */
#include "history_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/*
 * One row per block in a rowid table, so SQLite fills the block's overflow pages whole; the
 * summary index holds everything but the rows, so a downsampled page scans it alone.
 */
const char hist_schema_sql[] =
    "CREATE TABLE metrics_blocks ("
    "  job_id TEXT NOT NULL,"
    "  first INTEGER NOT NULL,"                     /* iteration of the block's first row */
    "  n INTEGER NOT NULL,"                         /* rows first .. first + n - 1 */
    "  min_loss REAL, min_at INTEGER NOT NULL,"     /* lowest loss and its iteration */
    "  max_loss REAL, max_at INTEGER NOT NULL,"     /* highest loss and its iteration */
    "  eval_at INTEGER,"                            /* the latest row with an eval_loss, or NULL */
    "  data BLOB NOT NULL,"                         /* the rows, as hist_encode writes them */
    "  PRIMARY KEY (job_id, first));"
    "CREATE INDEX metrics_blocks_summary ON metrics_blocks"
    "  (job_id, first, n, min_loss, min_at, max_loss, max_at, eval_at);"
    "CREATE INDEX metrics_blocks_evals ON metrics_blocks (job_id, first) WHERE eval_at IS NOT NULL;";

/*
 * The encoding, little-endian: a 24-byte header
 *   u8 version (1), u8 flags (1: lr per row), u16 n, u16 evaluations, u16 bytes of times,
 *   i64 time of row 0 in microseconds, f64 lr (when the same on every row)
 * then by column: f64 loss, f64 grad_norm, f32 seconds_per_iteration, f32 samples_per_second,
 * f32 data_wait_seconds, [f64 lr], (u16 row, f64 eval_loss) for each row with an evaluation,
 * and each row's microseconds past the row before it (row 0: past itself, 0) as a LEB128
 * varint: 1 to 3 bytes for steps of 16 ms to 2 s.
 */
#define HEADER 24
#define FIXED_ROW 28
#define VERSION 1
#define FLAG_LR_PER_ROW 1

static void put_u16(unsigned char *p, unsigned v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static unsigned get_u16(const unsigned char *p) { return p[0] | (unsigned)p[1] << 8; }

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_f64(unsigned char *p, double x)
{
    uint64_t v;
    memcpy(&v, &x, 8);
    put_u64(p, v);
}

static double get_f64(const unsigned char *p)
{
    uint64_t v = get_u64(p);
    double x;
    memcpy(&x, &v, 8);
    return x;
}

static void put_f32(unsigned char *p, double x)
{
    float f = (float)x;
    uint32_t v;
    memcpy(&v, &f, 4);
    put_u32(p, v);
}

static double get_f32(const unsigned char *p)
{
    uint32_t v = get_u32(p);
    float f;
    memcpy(&f, &v, 4);
    return (double)f;
}

static int64_t time_us(double t)
{
    return (int64_t)llround(t * 1e6);
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* The next varint at *p (at most 5 bytes, below end); -1 when malformed. */
static int64_t get_varint(const unsigned char **p, const unsigned char *end)
{
    uint64_t v = 0;
    for (int shift = 0; *p < end && shift < 35; shift += 7) {
        unsigned char c = *(*p)++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return (int64_t)v;
    }
    return -1;
}

/* Microseconds from row a to row b; -1 when b is before a or too far after it to share a block. */
static int64_t step_us(const struct metrics_row *a, const struct metrics_row *b)
{
    int64_t d = time_us(b->v[METRIC_TIME]) - time_us(a->v[METRIC_TIME]);
    return d >= 0 && d <= (int64_t)UINT32_MAX ? d : -1;
}

/* The bytes row i of b takes (lr the same as row 0's). */
static size_t row_bytes(const struct hist_block *b, int i)
{
    int64_t d = i ? step_us(&b->rows[i - 1], &b->rows[i]) : 0;
    return FIXED_ROW + varint_len((uint64_t)(d < 0 ? 0 : d)) + (isnan(b->rows[i].v[METRIC_EVAL_LOSS]) ? 0 : 10);
}

size_t hist_encode(const struct hist_block *b, unsigned char *out)
{
    const struct metrics_row *r = b->rows;
    int n = b->n, evals = 0;
    bool lr_per_row = false;
    size_t times = 0;
    for (int i = 0; i < n; i++) {
        int64_t d = i ? step_us(&r[i - 1], &r[i]) : 0;
        if (d < 0)
            return 0;
        times += varint_len((uint64_t)d);
        evals += !isnan(r[i].v[METRIC_EVAL_LOSS]);
        lr_per_row |= memcmp(&r[i].v[METRIC_LR], &r[0].v[METRIC_LR], sizeof(double)) != 0;
    }
    out[0] = VERSION;
    out[1] = lr_per_row ? FLAG_LR_PER_ROW : 0;
    put_u16(out + 2, (unsigned)n);
    put_u16(out + 4, (unsigned)evals);
    put_u16(out + 6, (unsigned)times);
    put_u64(out + 8, (uint64_t)time_us(r[0].v[METRIC_TIME]));
    put_f64(out + 16, r[0].v[METRIC_LR]);
    unsigned char *p = out + HEADER;
    for (int i = 0; i < n; i++, p += 8)
        put_f64(p, r[i].v[METRIC_LOSS]);
    for (int i = 0; i < n; i++, p += 8)
        put_f64(p, r[i].v[METRIC_GRAD_NORM]);
    static const int narrow[] = {METRIC_SECONDS_PER_ITERATION, METRIC_SAMPLES_PER_SECOND,
                                 METRIC_DATA_WAIT_SECONDS};
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < n; i++, p += 4)
            put_f32(p, r[i].v[narrow[c]]);
    for (int i = 0; lr_per_row && i < n; i++, p += 8)
        put_f64(p, r[i].v[METRIC_LR]);
    for (int i = 0; i < n; i++)
        if (!isnan(r[i].v[METRIC_EVAL_LOSS])) {
            put_u16(p, (unsigned)i);
            put_f64(p + 2, r[i].v[METRIC_EVAL_LOSS]);
            p += 10;
        }
    for (int i = 0; i < n; i++)
        p = put_varint(p, (uint64_t)(i ? step_us(&r[i - 1], &r[i]) : 0));
    return (size_t)(p - out);
}

int hist_decode(const unsigned char *data, size_t len, int64_t first, int n, struct hist_block *b,
                struct err *e)
{
    if (len < HEADER || data[0] != VERSION || (int)get_u16(data + 2) != n || n < 1 ||
        n > HIST_BLOCK_ROWS)
        return err_set(e, ERR_INVALID_DATA, "metrics block at iteration %lld: bad header",
                       (long long)first);
    bool lr_per_row = data[1] & FLAG_LR_PER_ROW;
    size_t evals = get_u16(data + 4), times = get_u16(data + 6);
    size_t need = HEADER + (size_t)n * (FIXED_ROW + (lr_per_row ? 8 : 0)) + evals * 10 + times;
    if (len != need)
        return err_set(e, ERR_INVALID_DATA, "metrics block at iteration %lld: %zu bytes, not %zu",
                       (long long)first, len, need);
    int64_t t = (int64_t)get_u64(data + 8);
    double lr = get_f64(data + 16);
    const unsigned char *loss = data + HEADER, *gn = loss + 8 * n, *spi = gn + 8 * n, *sps = spi + 4 * n,
                        *wait = sps + 4 * n, *lrs = wait + 4 * n, *ev = lrs + (lr_per_row ? 8 * n : 0),
                        *tp = ev + 10 * evals, *end = data + len;
    b->first = first;
    b->n = n;
    b->bytes = len;
    for (int i = 0; i < n; i++) {
        double *v = b->rows[i].v;
        int64_t d = get_varint(&tp, end);
        if (d < 0)
            return err_set(e, ERR_INVALID_DATA, "metrics block at iteration %lld: bad time",
                           (long long)first);
        t += d;
        v[METRIC_ITERATION] = (double)(first + i);
        v[METRIC_TIME] = (double)t / 1e6;
        v[METRIC_LOSS] = get_f64(loss + 8 * i);
        v[METRIC_GRAD_NORM] = get_f64(gn + 8 * i);
        v[METRIC_SECONDS_PER_ITERATION] = get_f32(spi + 4 * i);
        v[METRIC_SAMPLES_PER_SECOND] = get_f32(sps + 4 * i);
        v[METRIC_DATA_WAIT_SECONDS] = get_f32(wait + 4 * i);
        v[METRIC_LR] = lr_per_row ? get_f64(lrs + 8 * i) : lr;
        v[METRIC_EVAL_LOSS] = NAN;
    }
    for (size_t k = 0; k < evals; k++, ev += 10) {
        unsigned i = get_u16(ev);
        if ((int)i >= n)
            return err_set(e, ERR_INVALID_DATA, "metrics block at iteration %lld: bad evaluation row",
                           (long long)first);
        b->rows[i].v[METRIC_EVAL_LOSS] = get_f64(ev + 2);
    }
    return 0;
}

/* The buffer ------------------------------------------------------------------------------- */

static const char *const stmt_sql[HST_COUNT] = {
    [HST_PUT] = "INSERT OR REPLACE INTO metrics_blocks (job_id, first, n, min_loss, min_at, max_loss,"
                " max_at, eval_at, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    [HST_LAST_BLOCK] = "SELECT first, n, data FROM metrics_blocks WHERE job_id = ?"
                       " ORDER BY first DESC LIMIT 1",
    [HST_BLOCK_AT] = "SELECT first, n, data FROM metrics_blocks WHERE job_id = ?1 AND first <= ?2"
                     " ORDER BY first DESC LIMIT 1",
    [HST_DROP_FROM] = "DELETE FROM metrics_blocks WHERE job_id = ? AND first >= ?",
    [HST_SUMMARIES] = "SELECT first, n, min_loss, min_at, max_loss, max_at, eval_at FROM metrics_blocks"
                      " WHERE job_id = ?1 AND first >= ?2 ORDER BY first",
    [HST_LAST_EVAL] = "SELECT eval_at FROM metrics_blocks WHERE job_id = ? AND eval_at IS NOT NULL"
                      " ORDER BY first DESC LIMIT 1",
};

int hist_fail(struct hist *h, int rc, const char *what, struct err *e)
{
    return err_set(e, ERR_IO, "sqlite: metrics history: %s: %s (%d)", what, sqlite3_errmsg(h->conn), rc);
}

int hist_open(sqlite3 *conn, struct hist **out, struct err *e)
{
    struct hist *h = calloc(1, sizeof *h);
    if (!h)
        return err_set(e, ERR_NOMEM, "metrics history: out of memory");
    h->conn = conn;
    for (int i = 0; i < HST_COUNT; i++) {
        int rc = sqlite3_prepare_v3(conn, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &h->st[i], NULL);
        if (rc != SQLITE_OK) {
            hist_fail(h, rc, stmt_sql[i], e);
            hist_free(h);
            return e->code;
        }
    }
    *out = h;
    return 0;
}

void hist_free(struct hist *h)
{
    if (!h)
        return;
    for (int i = 0; i < HST_COUNT; i++)
        sqlite3_finalize(h->st[i]);
    for (size_t i = 0; i < h->n_open; i++)
        free(h->open[i]);
    free(h->open);
    for (int i = 0; i < HIST_TEXT_CACHED; i++) {
        free(h->text[i].text);
        free(h->text[i].off);
    }
    for (int i = 0; i < HIST_SUMS_CACHED; i++)
        free(h->sums[i].s);
    free(h);
}

void hist_reset(sqlite3_stmt *s)
{
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

/* Reads the block whose rows include iteration it (stmt HST_BLOCK_AT) or the latest (HST_LAST_BLOCK). */
int hist_read_block(struct hist *h, enum hist_stmt which, const char *job_id, int64_t it,
                    struct hist_block *b, bool *found, struct err *e)
{
    sqlite3_stmt *s = h->st[which];
    int rc = sqlite3_bind_text(s, 1, job_id, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && which == HST_BLOCK_AT)
        rc = sqlite3_bind_int64(s, 2, it);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    *found = rc == SQLITE_ROW;
    int out = 0;
    if (rc == SQLITE_ROW)
        out = hist_decode(sqlite3_column_blob(s, 2), (size_t)sqlite3_column_bytes(s, 2),
                          sqlite3_column_int64(s, 0), sqlite3_column_int(s, 1), b, e);
    else if (rc != SQLITE_DONE)
        out = hist_fail(h, rc, "reading a block", e);
    hist_reset(s);
    return out;
}

/* The buffered block that job_id's next row goes to, or NULL. */
static struct hist_block *open_of(struct hist *h, const char *job_id)
{
    for (size_t i = h->n_open; i-- > 0;)
        if (strcmp(h->open[i]->job_id, job_id) == 0)
            return &h->open[i]->b;
    return NULL;
}

static struct hist_block *new_open(struct hist *h, const char *job_id, struct err *e)
{
    if (h->n_open == h->cap_open) {
        size_t cap = h->cap_open ? 2 * h->cap_open : 8;
        struct hist_open **v = realloc(h->open, cap * sizeof *v);
        if (!v) {
            err_set(e, ERR_NOMEM, "metrics history: out of memory");
            return NULL;
        }
        h->open = v;
        h->cap_open = cap;
    }
    struct hist_open *o = malloc(sizeof *o);
    if (!o) {
        err_set(e, ERR_NOMEM, "metrics history: out of memory");
        return NULL;
    }
    memcpy(o->job_id, job_id, sizeof o->job_id);
    o->b.n = 0;
    h->open[h->n_open++] = o;
    return &o->b;
}

/* Whether row can follow the rows of b in the same block. */
static bool fits(const struct hist_block *b, const struct metrics_row *row)
{
    if (b->n == 0 || b->n == HIST_BLOCK_ROWS || (int64_t)row->v[METRIC_ITERATION] != b->first + b->n)
        return false;
    int64_t d = step_us(&b->rows[b->n - 1], row);
    size_t add = FIXED_ROW + varint_len((uint64_t)(d < 0 ? 0 : d)) + (isnan(row->v[METRIC_EVAL_LOSS]) ? 0 : 10);
    return d >= 0 && b->bytes + add <= HIST_BLOCK_BYTES;
}

/* Recounts b->bytes after rows were cut off. */
static void recount(struct hist_block *b)
{
    b->bytes = HEADER;
    for (int i = 0; i < b->n; i++)
        b->bytes += row_bytes(b, i);
}

/*
 * Memory stays bounded while the database cannot be written for long: the oldest buffered
 * block goes, said in the log at the first such loss and at every further million rows.
 */
static void drop_oldest(struct hist *h)
{
    struct hist_open *o = h->open[0];
    if (h->dropped_rows / 1000000 != (h->dropped_rows + (uint64_t)o->b.n) / 1000000 || !h->dropped_rows)
        log_error("job %s: %d metrics rows from iteration %lld are lost: the state database has not "
                  "been writable for %zu rows (%llu lost in all)", o->job_id, o->b.n, (long long)o->b.first,
                  h->pending_rows, (unsigned long long)(h->dropped_rows + (uint64_t)o->b.n));
    h->dropped_rows += (uint64_t)o->b.n;
    h->pending_rows -= (size_t)o->b.n;
    free(o);
    memmove(h->open, h->open + 1, (h->n_open - 1) * sizeof *h->open);
    h->n_open--;
}

int hist_append(struct hist *h, const char *job_id, const struct metrics_row *row, struct err *e)
{
    struct hist_block *b = open_of(h, job_id);
    bool loaded = false;
    if (!b) {
        /* The job's stored last block, written at the last flush, goes on filling. */
        if (!(b = new_open(h, job_id, e)))
            return e->code;
        struct err ignored = {0};
        if (hist_read_block(h, HST_LAST_BLOCK, job_id, 0, b, &loaded, &ignored))
            loaded = false;
        if (!loaded)
            b->n = 0;
    }
    if (!fits(b, row)) {
        /* Buffered rows that were never written keep their block; a block read back does not. */
        if (b->n && !loaded && !(b = new_open(h, job_id, e)))
            return e->code;
        b->first = (int64_t)row->v[METRIC_ITERATION];
        b->n = 0;
        b->bytes = HEADER;
    }
    b->rows[b->n++] = *row;
    b->bytes += row_bytes(b, b->n - 1);
    h->pending_rows++;
    if (h->pending_rows > HIST_MAX_PENDING_ROWS && h->n_open > 1)
        drop_oldest(h);
    return 0;
}

/* The lowest (or highest) loss in rows [lo, hi) of b: NaN losses lose to any number; see pick_loss. */
static int extreme(const struct hist_block *b, int lo, int hi, bool highest)
{
    int at = lo;
    for (int i = lo; i < hi; i++) {
        double l = b->rows[i].v[METRIC_LOSS], best = b->rows[at].v[METRIC_LOSS];
        if (isnan(best) || (highest ? l > best : l < best))
            at = i;
    }
    return at;
}

void hist_summarize(const struct hist_block *b, int *lowest, int *highest, int *eval)
{
    *lowest = extreme(b, 0, b->n, false);
    *highest = extreme(b, 0, b->n, true);
    *eval = -1;
    for (int i = 0; i < b->n; i++)
        if (!isnan(b->rows[i].v[METRIC_EVAL_LOSS]))
            *eval = i;
}

static void bind_loss(sqlite3_stmt *s, int i, double x, int *rc)
{
    int r = isnan(x) ? sqlite3_bind_null(s, i) : sqlite3_bind_double(s, i, x);
    if (*rc == SQLITE_OK)
        *rc = r;
}

/* Stores b with its summary, replacing the stored block that starts where it does. */
static int hist_put(struct hist *h, const char *job_id, const struct hist_block *b, struct err *e)
{
    unsigned char data[HIST_BLOCK_MAX];
    size_t len = hist_encode(b, data);
    if (!len)
        return err_set(e, ERR_INTERNAL, "metrics history: a block of job %s spans too long", job_id);
    int lo, hi, ev;
    hist_summarize(b, &lo, &hi, &ev);
    sqlite3_stmt *s = h->st[HST_PUT];
    int rc = sqlite3_bind_text(s, 1, job_id, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 2, b->first);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(s, 3, b->n);
    bind_loss(s, 4, b->rows[lo].v[METRIC_LOSS], &rc);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 5, b->first + lo);
    bind_loss(s, 6, b->rows[hi].v[METRIC_LOSS], &rc);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 7, b->first + hi);
    if (rc == SQLITE_OK)
        rc = ev < 0 ? sqlite3_bind_null(s, 8) : sqlite3_bind_int64(s, 8, b->first + ev);
    if (rc == SQLITE_OK) rc = sqlite3_bind_blob(s, 9, data, (int)len, SQLITE_STATIC);
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_DONE)
        rc = SQLITE_OK;
    hist_reset(s);
    return rc == SQLITE_OK ? 0 : hist_fail(h, rc, "writing a block", e);
}

int hist_write(struct hist *h, struct err *e)
{
    for (size_t i = 0; i < h->n_open; i++)
        if (h->open[i]->b.n && hist_put(h, h->open[i]->job_id, &h->open[i]->b, e))
            return e->code;
    return 0;
}

void hist_committed(struct hist *h)
{
    for (size_t i = 0; i < h->n_open; i++)
        free(h->open[i]);
    h->n_open = 0;
    h->pending_rows = 0;
}

size_t hist_pending_rows(const struct hist *h)
{
    return h->pending_rows;
}

uint64_t hist_dropped_rows(const struct hist *h)
{
    return h->dropped_rows;
}

bool hist_pending(const struct hist *h, const char *job_id)
{
    return open_of((struct hist *)h, job_id) != NULL;
}

void hist_forget(struct hist *h, const char *job_id, int64_t from)
{
    size_t out = 0;
    for (size_t i = 0; i < h->n_open; i++) {
        struct hist_open *o = h->open[i];
        if (strcmp(o->job_id, job_id) == 0 && o->b.first + o->b.n > from) {
            int keep = o->b.first < from ? (int)(from - o->b.first) : 0;
            h->pending_rows -= h->pending_rows < (size_t)(o->b.n - keep) ? h->pending_rows : (size_t)(o->b.n - keep);
            o->b.n = keep;
            recount(&o->b);
            if (keep == 0) {
                free(o);
                continue;
            }
        }
        h->open[out++] = o;
    }
    h->n_open = out;
}

int hist_truncate(struct hist *h, const char *job_id, int64_t from, struct err *e)
{
    hist_cache_forget(h, job_id);
    sqlite3_stmt *s = h->st[HST_DROP_FROM];
    int rc = sqlite3_bind_text(s, 1, job_id, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(s, 2, from);
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_DONE)
        rc = SQLITE_OK;
    hist_reset(s);
    if (rc != SQLITE_OK)
        return hist_fail(h, rc, "dropping rows", e);
    /* The block that holds from keeps its rows before it. */
    struct hist_block *b = malloc(sizeof *b);
    if (!b)
        return err_set(e, ERR_NOMEM, "metrics history: out of memory");
    bool found = false;
    int out = hist_read_block(h, HST_BLOCK_AT, job_id, from, b, &found, e);
    if (!out && found && b->first + b->n > from) {
        b->n = (int)(from - b->first);
        out = hist_put(h, job_id, b, e);
    }
    free(b);
    return out;
}

int hist_purge_chunk(sqlite3 *conn, const char *job_id, int chunk, int *deleted, struct err *e)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(conn,
        "DELETE FROM metrics_blocks WHERE rowid IN"
        " (SELECT rowid FROM metrics_blocks WHERE job_id = ? LIMIT ?)", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return err_set(e, ERR_IO, "sqlite: purging metrics: %s", sqlite3_errmsg(conn));
    rc = sqlite3_bind_text(s, 1, job_id, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(s, 2, chunk);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    *deleted = rc == SQLITE_DONE ? sqlite3_changes(conn) : 0;
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : err_set(e, ERR_IO, "sqlite: purging metrics: %s", sqlite3_errmsg(conn));
}
