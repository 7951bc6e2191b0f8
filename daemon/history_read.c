/*
 * history_read.c — pages of the metrics history: stored blocks, then the buffered ones not yet
 * written; downsampled from the blocks' summaries; consecutive rows copied from rendered text.
 */
#include "history_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "buf.h"

/* A block's summary, and the rows of it that fall in the page. */
struct summary {
    const struct hist_block *mem;       /* a buffered block; NULL: a stored one */
    int64_t first;
    int n;
    double min_loss, max_loss;          /* NaN where every loss of the block is */
    int64_t min_at, max_at, eval_at;    /* iterations; eval_at -1: no evaluation */
    size_t pos;                         /* page position of the block's first row in the page */
    int lo, cnt;                        /* its rows [lo, lo + cnt) are in the page */
};

struct page {
    struct summary *s;
    size_t n, cap;
    size_t total;                       /* rows in the page */
};

/* A few decoded blocks: a bucket's picks mostly lie in the blocks its walk just read. */
#define CACHED 4

struct reader {
    struct hist *h;
    const char *job_id;
    struct page pg;
    struct hist_block *cache[CACHED];
    size_t cached_block[CACHED];        /* index into pg.s, or SIZE_MAX */
    unsigned next;
};

static double real_or_nan(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}

/* Adds m to the page with its rows at or past since and below end, up to limit in all; *full: it had limit. */
static int add(struct page *pg, struct summary m, int64_t since, int64_t end, int64_t limit, bool *full,
               struct err *e)
{
    int64_t stop = m.first + m.n < end ? m.first + m.n : end;
    *full = limit >= 0 && (int64_t)pg->total >= limit;
    if (*full || stop <= since || stop <= m.first)
        return 0;
    m.lo = m.first < since ? (int)(since - m.first) : 0;
    m.cnt = (int)(stop - m.first) - m.lo;
    if (limit >= 0 && (int64_t)(pg->total + (size_t)m.cnt) > limit)
        m.cnt = (int)(limit - (int64_t)pg->total);
    m.pos = pg->total;
    if (pg->n == pg->cap) {
        size_t cap = pg->cap ? 2 * pg->cap : 64;
        struct summary *v = realloc(pg->s, cap * sizeof *v);
        if (!v)
            return err_set(e, ERR_NOMEM, "metrics history: out of memory");
        pg->s = v;
        pg->cap = cap;
    }
    pg->s[pg->n++] = m;
    pg->total += (size_t)m.cnt;
    return 0;
}

/* job_id's slot of kept summaries (a free or the least recently used one, emptied, if none). */
static struct hist_sums *sums_slot(struct hist *h, const char *job_id)
{
    struct hist_sums *slot = &h->sums[0];
    for (int i = 0; i < HIST_SUMS_CACHED; i++) {
        if (strcmp(h->sums[i].job_id, job_id) == 0)
            return &h->sums[i];
        if (h->sums[i].used < slot->used)
            slot = &h->sums[i];
    }
    slot->n = 0;
    memcpy(slot->job_id, job_id, sizeof slot->job_id);
    return slot;
}

/* Brings job_id's kept summaries up to date: its last kept one and every one after it, read again. */
static int refresh_sums(struct hist *h, struct hist_sums *c, struct err *e)
{
    int64_t from = c->n ? c->s[--c->n].first : INT64_MIN;
    sqlite3_stmt *s = h->st[HST_SUMMARIES];
    int rc = sqlite3_bind_text(s, 1, c->job_id, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(s, 2, from);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        if (c->n == c->cap) {
            size_t cap = c->cap ? 2 * c->cap : 64;
            struct hist_sum *v = realloc(c->s, cap * sizeof *v);
            if (!v) {
                rc = SQLITE_NOMEM;
                break;
            }
            c->s = v;
            c->cap = cap;
        }
        c->s[c->n++] = (struct hist_sum){
            .first = sqlite3_column_int64(s, 0), .n = sqlite3_column_int(s, 1),
            .min_loss = real_or_nan(s, 2), .min_at = sqlite3_column_int64(s, 3),
            .max_loss = real_or_nan(s, 4), .max_at = sqlite3_column_int64(s, 5),
            .eval_at = sqlite3_column_type(s, 6) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, 6),
        };
    }
    hist_reset(s);
    if (rc == SQLITE_DONE)
        return 0;
    c->n = 0;
    c->job_id[0] = '\0';   /* half read: read it all again next time */
    return rc == SQLITE_NOMEM ? err_set(e, ERR_NOMEM, "metrics history: out of memory")
                              : hist_fail(h, rc, "reading summaries", e);
}

/* The stored blocks' summaries from since on, their rows before end (where the buffered ones take over). */
static int load_stored(struct hist *h, const char *job_id, int64_t since, int64_t end, int64_t limit,
                       struct page *pg, struct err *e)
{
    struct hist_sums *c = sums_slot(h, job_id);
    if (refresh_sums(h, c, e))
        return e->code;
    c->used = ++h->ticks;
    /* Blocks hold consecutive iterations: the first that reaches since, by bisection. */
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->s[mid].first + c->s[mid].n <= since)
            lo = mid + 1;
        else
            hi = mid;
    }
    bool full = false;
    for (size_t i = lo; i < c->n && !full && c->s[i].first < end; i++) {
        const struct hist_sum *x = &c->s[i];
        struct summary m = {
            .first = x->first, .n = x->n, .min_loss = x->min_loss, .max_loss = x->max_loss,
            .min_at = x->min_at, .max_at = x->max_at, .eval_at = x->eval_at,
        };
        if (m.n >= 1 && add(pg, m, since, end, limit, &full, e))
            return e->code;
    }
    return 0;
}

/*
 * The page's blocks: the stored ones, then the job's buffered blocks, which hold its latest rows
 * and stand for every stored row from the first of them on (a block read back and grown, or the
 * rows a truncation not yet written drops). Nothing needs writing before a read.
 */
static int load_page(struct hist *h, const char *job_id, int64_t since, int64_t limit, struct page *pg,
                     struct err *e)
{
    int64_t end = INT64_MAX;
    for (size_t i = 0; i < h->n_open; i++)
        if (strcmp(h->open[i]->job_id, job_id) == 0 && h->open[i]->b.n && h->open[i]->b.first < end)
            end = h->open[i]->b.first;
    if (load_stored(h, job_id, since, end, limit, pg, e))
        return e->code;
    bool full = false;
    for (size_t i = 0; i < h->n_open && !full; i++) {
        const struct hist_block *b = &h->open[i]->b;
        if (strcmp(h->open[i]->job_id, job_id) != 0 || b->n == 0)
            continue;
        int lo, hi, ev;
        hist_summarize(b, &lo, &hi, &ev);
        struct summary m = {
            .mem = b, .first = b->first, .n = b->n,
            .min_loss = b->rows[lo].v[METRIC_LOSS], .min_at = b->first + lo,
            .max_loss = b->rows[hi].v[METRIC_LOSS], .max_at = b->first + hi,
            .eval_at = ev < 0 ? -1 : b->first + ev,
        };
        if (add(pg, m, since, INT64_MAX, limit, &full, e))
            return e->code;
    }
    return 0;
}

/* Block k of the page, decoded (from the cache when it is there); NULL with e set. */
static const struct hist_block *block(struct reader *r, size_t k, struct err *e)
{
    if (r->pg.s[k].mem)
        return r->pg.s[k].mem;
    for (int i = 0; i < CACHED; i++)
        if (r->cache[i] && r->cached_block[i] == k)
            return r->cache[i];
    unsigned slot = r->next++ % CACHED;
    if (!r->cache[slot] && !(r->cache[slot] = malloc(sizeof *r->cache[slot]))) {
        err_set(e, ERR_NOMEM, "metrics history: out of memory");
        return NULL;
    }
    bool found = false;
    r->cached_block[slot] = SIZE_MAX;
    if (hist_read_block(r->h, HST_BLOCK_AT, r->job_id, r->pg.s[k].first, r->cache[slot], &found, e))
        return NULL;
    if (!found || r->cache[slot]->first != r->pg.s[k].first) {
        err_set(e, ERR_IO, "metrics history: the block at iteration %lld went away while read",
                (long long)r->pg.s[k].first);
        return NULL;
    }
    r->cached_block[slot] = k;
    return r->cache[slot];
}

/* The page block that holds page position p. */
static size_t block_of(const struct page *pg, size_t p)
{
    size_t lo = 0, hi = pg->n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (pg->s[mid].pos <= p)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/*
 * x as jansson writes a real with JSON_REAL_PRECISION(17) (what api_dump uses for every other
 * body): %.17g, ".0" when that reads as an integer, no '+' or leading zeros in the exponent.
 * null when x is not finite. Returns the length written at out.
 */
static size_t real_text(double x, char *out)
{
    if (!isfinite(x)) {
        memcpy(out, "null", 4);
        return 4;
    }
    int n = snprintf(out, 32, "%.17g", x);
    if (!memchr(out, '.', (size_t)n) && !memchr(out, 'e', (size_t)n)) {
        memcpy(out + n, ".0", 2);
        return (size_t)n + 2;
    }
    char *exp = memchr(out, 'e', (size_t)n);
    if (exp) {
        char *digits = exp + 1 + (exp[1] == '-'), *from = exp + 1;
        while (*from == '+' || *from == '-' || (*from == '0' && from[1]))
            from++;
        memmove(digits, from, (size_t)(out + n - from) + 1);
        n = (int)strlen(out);
    }
    return (size_t)n;
}

size_t hist_row_text(const struct metrics_row *row, char *buf)
{
    size_t n = (size_t)sprintf(buf, "[%lld", (long long)row->v[METRIC_ITERATION]);
    for (int c = 1; c < METRIC_NCOLS; c++) {
        buf[n++] = ',';
        n += real_text(row->v[c], buf + n);
    }
    buf[n++] = ']';
    return n;
}

/* A growing response body; a failed append leaves failed set. */
struct textbuf {
    char *p;
    size_t len, cap;
    bool failed;
};

static void put(struct textbuf *b, const char *s, size_t n)
{
    if (!b->failed && buf_append(&b->p, &b->len, &b->cap, s, n))
        b->failed = true;
}

static int put_row(struct reader *r, struct textbuf *t, size_t p, bool *first, struct err *e)
{
    size_t k = block_of(&r->pg, p);
    const struct hist_block *b = block(r, k, e);
    if (!b)
        return e->code;
    char text[HIST_ROW_TEXT_MAX];
    size_t n = hist_row_text(&b->rows[r->pg.s[k].lo + (int)(p - r->pg.s[k].pos)], text);
    if (!*first)
        put(t, ",", 1);
    *first = false;
    put(t, text, n);
    return 0;
}

/*
 * The lowest- or highest-loss candidate so far: a number beats a NaN, and a later row replaces
 * an earlier one only when strictly better, so the earliest extreme wins.
 */
struct pick {
    size_t at;
    double loss;
};

static void consider(struct pick *k, double loss, size_t at, bool highest)
{
    if (isnan(k->loss) || (highest ? loss > k->loss : loss < k->loss)) {
        k->loss = loss;
        k->at = at;
    }
}

/* Bucket [s, e) of the page: picks[] gets its first, last, lowest, highest loss and latest eval row. */
static int bucket_picks(struct reader *r, size_t s, size_t e, size_t picks[5], struct err *er)
{
    struct pick lo = {s, NAN}, hi = {s, NAN};
    size_t eval = s;
    for (size_t k = block_of(&r->pg, s); k < r->pg.n && r->pg.s[k].pos < e; k++) {
        const struct summary *m = &r->pg.s[k];
        size_t from = m->pos > s ? m->pos : s, to = m->pos + (size_t)m->cnt < e ? m->pos + (size_t)m->cnt : e;
        if (from == m->pos && to == m->pos + (size_t)m->n && m->lo == 0) {
            /* The whole block is in the bucket: its summary answers. */
            consider(&lo, m->min_loss, m->pos + (size_t)(m->min_at - m->first), false);
            consider(&hi, m->max_loss, m->pos + (size_t)(m->max_at - m->first), true);
            if (m->eval_at >= 0)
                eval = m->pos + (size_t)(m->eval_at - m->first);
            continue;
        }
        const struct hist_block *b = block(r, k, er);
        if (!b)
            return er->code;
        for (size_t p = from; p < to; p++) {
            const double *v = b->rows[m->lo + (int)(p - m->pos)].v;
            consider(&lo, v[METRIC_LOSS], p, false);
            consider(&hi, v[METRIC_LOSS], p, true);
            if (!isnan(v[METRIC_EVAL_LOSS]))
                eval = p;
        }
    }
    picks[0] = s;
    picks[1] = e - 1;
    picks[2] = lo.at;
    picks[3] = hi.at;
    picks[4] = eval;
    return 0;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * The page cut into buckets; each keeps its first, last, lowest-loss and highest-loss row, so
 * a plot of the thinned history still shows every spike. With evals (the job has data.test),
 * each also keeps its latest row with an eval_loss, in fewer buckets.
 */
static int put_downsampled(struct reader *r, struct textbuf *t, int64_t max_points, bool evals,
                           bool *first, struct err *e)
{
    size_t per = evals && max_points >= 5 ? 5 : 4;
    size_t buckets = (size_t)max_points / per, n = r->pg.total;
    for (size_t k = 0; k < buckets; k++) {
        size_t s = n * k / buckets, end = n * (k + 1) / buckets, picks[5];
        if (s >= end)
            continue;
        if (bucket_picks(r, s, end, picks, e))
            return e->code;
        qsort(picks, per, sizeof *picks, cmp_size);
        for (size_t q = 0; q < per; q++)
            if ((q == 0 || picks[q] != picks[q - 1]) && put_row(r, t, picks[q], first, e))
                return e->code;
    }
    return 0;
}

void hist_cache_forget(struct hist *h, const char *job_id)
{
    for (int i = 0; i < HIST_TEXT_CACHED; i++)
        if (strcmp(h->text[i].job_id, job_id) == 0) {
            free(h->text[i].text);
            free(h->text[i].off);
            memset(&h->text[i], 0, sizeof h->text[i]);
        }
    for (int i = 0; i < HIST_SUMS_CACHED; i++)
        if (strcmp(h->sums[i].job_id, job_id) == 0) {
            h->sums[i].n = 0;
            h->sums[i].job_id[0] = '\0';
        }
}

/* Stored block k's rows as text, rendered now or earlier; NULL with e set. */
static const struct hist_text *block_text(struct reader *r, size_t k, struct err *e)
{
    const struct summary *m = &r->pg.s[k];
    struct hist *h = r->h;
    struct hist_text *slot = &h->text[0];
    for (int i = 0; i < HIST_TEXT_CACHED; i++) {
        struct hist_text *x = &h->text[i];
        if (x->n == m->n && x->first == m->first && strcmp(x->job_id, r->job_id) == 0) {
            x->used = ++h->ticks;
            return x;
        }
        if (x->used < slot->used)
            slot = x;
    }
    const struct hist_block *b = block(r, k, e);
    if (!b)
        return NULL;
    free(slot->text);
    free(slot->off);
    memset(slot, 0, sizeof *slot);
    if (!(slot->text = malloc((size_t)b->n * HIST_ROW_TEXT_MAX)) ||
        !(slot->off = malloc(((size_t)b->n + 1) * sizeof *slot->off))) {
        err_set(e, ERR_NOMEM, "metrics history: out of memory");
        return NULL;
    }
    uint32_t len = 0;
    for (int i = 0; i < b->n; i++) {
        slot->off[i] = len;
        len += (uint32_t)hist_row_text(&b->rows[i], slot->text + len);
    }
    slot->off[b->n] = len;
    memcpy(slot->job_id, r->job_id, sizeof slot->job_id);
    slot->first = b->first;
    slot->n = b->n;
    slot->used = ++h->ticks;
    return slot;
}

/* Every row of the page in order: stored blocks from their rendered text, buffered ones row by row. */
static int put_all(struct reader *r, struct textbuf *t, bool *first, struct err *e)
{
    for (size_t k = 0; k < r->pg.n; k++) {
        const struct summary *m = &r->pg.s[k];
        if (m->mem) {
            for (size_t p = m->pos; p < m->pos + (size_t)m->cnt; p++)
                if (put_row(r, t, p, first, e))
                    return e->code;
            continue;
        }
        const struct hist_text *x = block_text(r, k, e);
        if (!x)
            return e->code;
        for (int i = m->lo; i < m->lo + m->cnt; i++) {
            if (!*first)
                put(t, ",", 1);
            *first = false;
            put(t, x->text + x->off[i], x->off[i + 1] - x->off[i]);
        }
    }
    return 0;
}

static int put_rows(struct reader *r, struct textbuf *t, int64_t max_points, bool evals, struct err *e)
{
    bool first = true;
    if (max_points > 0 && (int64_t)r->pg.total > max_points)
        return put_downsampled(r, t, max_points, evals, &first, e);
    return put_all(r, t, &first, e);
}

static void put_head(struct textbuf *t)
{
    put(t, "{\"columns\":[", 12);
    for (int c = 0; c < METRIC_NCOLS; c++) {
        put(t, c ? ",\"" : "\"", c ? 2 : 1);
        put(t, job_metric_columns[c], strlen(job_metric_columns[c]));
        put(t, "\"", 1);
    }
    put(t, "],\"rows\":[", 10);
}

static void put_tail(struct textbuf *t, int64_t next_since)
{
    char tail[64];
    int n = snprintf(tail, sizeof tail, "],\"next_since\":%lld}\n", (long long)next_since);
    put(t, tail, (size_t)n);
}

/* The iteration after the page's last row; since for an empty page. */
static int64_t page_next(const struct page *pg, int64_t since)
{
    if (!pg->total)
        return since;
    const struct summary *m = &pg->s[pg->n - 1];
    return m->first + m->lo + m->cnt;
}

static void reader_free(struct reader *r)
{
    for (int i = 0; i < CACHED; i++)
        free(r->cache[i]);
    free(r->pg.s);
}

char *hist_page_text(struct hist *h, const char *job_id, int64_t since, int64_t limit,
                     int64_t max_points, bool evals, size_t *len, struct err *e)
{
    struct reader r = {.h = h, .job_id = job_id};
    struct textbuf t = {0};
    int rc = load_page(h, job_id, since, limit, &r.pg, e);
    put_head(&t);
    if (!rc)
        rc = put_rows(&r, &t, max_points, evals, e);
    put_tail(&t, page_next(&r.pg, since));
    reader_free(&r);
    if (!rc && t.failed)
        rc = err_set(e, ERR_NOMEM, "metrics history: out of memory rendering the page");
    if (rc) {
        free(t.p);
        return NULL;
    }
    *len = t.len;
    return t.p;
}

/*
 * A page of consecutive rows rendered HIST_STREAM_ROWS at a time into one buffer of
 * HIST_STREAM_BYTES, so a page of any length holds no more than that while it is sent.
 * Rows written while it is read join it up to its limit: its rows are always consecutive
 * and next_since follows the last of them.
 */
_Static_assert(HIST_STREAM_ROWS * (HIST_ROW_TEXT_MAX + 1) + 64 <= HIST_STREAM_BYTES,
               "a piece of rows, or the head or tail, fits the stream's buffer");

struct hist_stream {
    struct hist *h;
    char job_id[17];
    int64_t next;                       /* the iteration the next piece starts at */
    int64_t left;                       /* rows still to send */
    enum { STREAM_ROWS, STREAM_TAIL, STREAM_END } stage;
    bool first;                         /* no row sent yet */
    struct textbuf t;                   /* rendered, from off on not yet read */
    size_t off;
};

struct hist_stream *hist_stream_open(struct hist *h, const char *job_id, int64_t since, int64_t limit,
                                     struct err *e)
{
    struct hist_stream *st = calloc(1, sizeof *st);
    if (!st || buf_reserve(&st->t.p, &st->t.cap, HIST_STREAM_BYTES)) {
        free(st);
        err_set(e, ERR_NOMEM, "metrics history: out of memory");
        return NULL;
    }
    st->h = h;
    snprintf(st->job_id, sizeof st->job_id, "%s", job_id);
    st->next = since;
    st->left = limit;
    st->first = true;
    put_head(&st->t);
    return st;
}

/* The stream's next piece into its buffer: rows, or once they are all sent, the tail. */
static int stream_fill(struct hist_stream *st, struct err *e)
{
    st->t.len = st->off = 0;
    if (st->stage == STREAM_TAIL || st->left == 0) {
        put_tail(&st->t, st->next);
        st->stage = STREAM_END;
        return 0;
    }
    struct reader r = {.h = st->h, .job_id = st->job_id};
    int64_t n = st->left < HIST_STREAM_ROWS ? st->left : HIST_STREAM_ROWS;
    int rc = load_page(st->h, st->job_id, st->next, n, &r.pg, e);
    if (!rc)
        rc = put_all(&r, &st->t, &st->first, e);
    if (!rc) {
        st->left -= (int64_t)r.pg.total;
        st->next = page_next(&r.pg, st->next);
        if (r.pg.total < (size_t)n)
            st->stage = STREAM_TAIL;   /* the history ends here */
    }
    reader_free(&r);
    if (!rc && st->t.failed)
        rc = err_set(e, ERR_NOMEM, "metrics history: out of memory rendering the page");
    return rc;
}

ssize_t hist_stream_read(struct hist_stream *st, char *out, size_t cap, struct err *e)
{
    while (st->off == st->t.len) {
        if (st->stage == STREAM_END)
            return 0;
        if (stream_fill(st, e))
            return -1;
    }
    size_t n = st->t.len - st->off < cap ? st->t.len - st->off : cap;
    memcpy(out, st->t.p + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

void hist_stream_free(struct hist_stream *st)
{
    if (!st)
        return;
    free(st->t.p);
    free(st);
}

int hist_last(struct hist *h, const char *job_id, bool evals, struct metrics_row *last,
              bool *has_last, int64_t *eval_it, double *eval_loss, struct err *e)
{
    struct hist_block *b = malloc(sizeof *b);
    if (!b)
        return err_set(e, ERR_NOMEM, "metrics history: out of memory");
    *eval_it = -1;
    *eval_loss = NAN;
    int rc = hist_read_block(h, HST_LAST_BLOCK, job_id, 0, b, has_last, e);
    if (!rc && *has_last)
        *last = b->rows[b->n - 1];
    sqlite3_stmt *s = h->st[HST_LAST_EVAL];
    int64_t at = -1;
    if (!rc) {
        int src = sqlite3_bind_text(s, 1, job_id, -1, SQLITE_STATIC);
        if (src == SQLITE_OK && (src = sqlite3_step(s)) == SQLITE_ROW)
            at = sqlite3_column_int64(s, 0);
        hist_reset(s);
        if (src != SQLITE_ROW && src != SQLITE_DONE)
            rc = hist_fail(h, src, "finding the latest evaluation", e);
    }
    bool found = false;
    if (!rc && at >= 0 && !(rc = hist_read_block(h, HST_BLOCK_AT, job_id, at, b, &found, e)) && found &&
        at - b->first < b->n) {
        *eval_it = at;
        *eval_loss = b->rows[at - b->first].v[METRIC_EVAL_LOSS];
    }
    free(b);
    return rc;
}

int hist_row_at(struct hist *h, const char *job_id, int64_t it, struct metrics_row *row, bool *found,
                struct err *e)
{
    struct hist_block *b = malloc(sizeof *b);
    if (!b)
        return err_set(e, ERR_NOMEM, "metrics history: out of memory");
    int rc = hist_read_block(h, HST_BLOCK_AT, job_id, it, b, found, e);
    *found = !rc && *found && it - b->first < b->n;
    if (*found)
        *row = b->rows[it - b->first];
    free(b);
    return rc;
}
