/* dataset.c — a dataset's partitions parsed or decoded (ahead, on workers) and kept resident when they fit,
   shuffled by (seed, epoch), served as batches; dataset_open.c lists and checks them. */
#include "dataset.h"

#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"
#include "parquet.h"

/* The partition read k-th in an epoch: name order, or a permutation that depends on (seed, epoch) only. */
static size_t part_at(struct dataset *ds, uint64_t epoch, size_t k)
{
    if (!ds->shuffle_partitions)
        return k;
    if (ds->perm_epoch != epoch) {
        shuffle_permutation(ds->perm, ds->n, ds->seed, epoch);
        ds->perm_epoch = epoch;
    }
    return ds->perm[k];
}

/* Learns or checks partition i's row count from the bytes in b. */
static int part_settle_rows(struct dataset *ds, size_t i, const struct csv_format *f, uint64_t rows,
                            struct err *e)
{
    struct part *p = &ds->parts[i];
    if (p->known && p->rows != rows)
        return err_set(e, ERR_INVALID_DATA, "%s: %llu rows, but shards metadata says %llu", f->name,
                       (unsigned long long)rows, (unsigned long long)p->rows);
    p->rows = rows;
    p->known = true;
    return ERR_OK;
}

struct csv_format dataset_part_format(const struct dataset *ds, size_t i)
{
    struct csv_format f = ds->fmt;
    f.name = ds->parts[i].obj->path;
    f.footer = ds->parts[i].footer;
    f.group = ds->parts[i].group;
    return f;
}

int dataset_part_measure(struct dataset *ds, size_t i, struct csv_layout *lay, bool strict, struct err *e)
{
    struct csv_format f = dataset_part_format(ds, i);
    struct store_blob b;
    int rc = store_map(&ds->url, ds->parts[i].obj, &b, e);
    if (rc)
        return rc;
    __atomic_fetch_add(&ds->cache.fetched, (uint64_t)b.len, __ATOMIC_RELAXED);
    uint64_t rows = 0;
    if (!strict || f.format == DATASET_FORMAT_PARQUET)
        rc = partition_measure(&f, b.data, b.len, lay, &rows, e);
    else if ((rc = csv_probe(&f, b.data, b.len, lay, e)) == ERR_OK)
        rc = csv_count_rows(&f, lay, b.data, b.len, &rows, e);
    if (rc == ERR_OK && strict && rows == 0)
        rc = err_set(e, ERR_INVALID_DATA, "%s: no rows", f.name);
    store_unmap(&b);
    return rc ? rc : part_settle_rows(ds, i, &f, rows, e);
}

/* Makes partition i's row count known, counting lines (no parsing) when nobody told us. */
static int part_count(struct dataset *ds, size_t i, struct err *e)
{
    struct csv_layout lay;
    return ds->parts[i].known ? ERR_OK : dataset_part_measure(ds, i, &lay, false, e);
}

bool dataset_part_empty(const struct dataset *ds, size_t i)
{
    return ds->parts[i].known && ds->parts[i].rows == 0;
}

/* Whether some batch of an epoch of total rows gives this replica a row of [start, start + rows). */
static bool share_touches(const struct dataset *ds, uint64_t start, uint64_t rows, uint64_t total)
{
    const uint64_t b_rows = ds->batch_size;
    for (uint64_t b = start / b_rows; rows && b <= (start + rows - 1) / b_rows; b++) {
        uint64_t n = total - b * b_rows < b_rows ? total - b * b_rows : b_rows;
        size_t lo, count;
        if (ds->drop_last && n < b_rows)
            continue; /* a tail nobody reads */
        dataset_share((size_t)n, ds->share_rank, ds->share_n, &lo, &count);
        if (count && b * b_rows + lo < start + rows && b * b_rows + lo + count > start)
            return true;
    }
    return false;
}

/* Where the current epoch's k-th partition starts in its rows (every count known), for a replica's read_ahead. */
static bool share_start(struct dataset *ds, size_t k, uint64_t *start)
{
    if (ds->share_epoch != ds->epoch) {
        if (!ds->share_starts && !(ds->share_starts = malloc(ds->n * sizeof *ds->share_starts)))
            return false;
        uint64_t at = 0;
        for (size_t j = 0; j < ds->n; j++) {
            ds->share_starts[j] = at;
            at += ds->parts[part_at(ds, ds->epoch, j)].rows;
        }
        ds->share_epoch = ds->epoch;
    }
    *start = ds->share_starts[k];
    return true;
}

/*
 * Queues the partitions the stream reaches after the current one (into the next
 * epoch too), so workers parse them meanwhile: one more than there are workers,
 * since a reader waiting for one of them parses the extra one itself, and, while
 * their counts are known, as many more as the next batch needs (small partitions,
 * such as Parquet row groups, would otherwise be read one batch at a time, while
 * the step waits). A replica queues only those its shares touch, once every count
 * is known.
 */
static void read_ahead(struct dataset *ds, size_t current)
{
    if (!ds->threads || ds->pool_failed)
        return;
    if (!ds->pool) {
        struct err e = {0};
        if (parse_ahead_start(ds->threads, &ds->pool, &e) != ERR_OK) {
            ds->pool_failed = true; /* slower, not wrong */
            return;
        }
    }
    uint64_t epoch = ds->epoch;
    size_t k = ds->pi, window = 0;
    uint64_t total = ds->share_n && !ds->buf_cap ? dataset_num_rows(ds) : 0, pos = 0; /* a buffer needs every row */
    bool sharing = total && ds->pi < ds->n && share_start(ds, ds->pi, &pos);
    if (sharing)
        pos += ds->parts[part_at(ds, epoch, ds->pi)].rows;
    uint64_t ahead = 0;    /* rows of the partitions after the current one, parsed or queued */
    bool counted = true;   /* every one of them has a known count */
    for (size_t step = 0; step < ds->n && (window <= ds->threads || (counted && ahead < ds->batch_size)); step++) {
        if (++k >= ds->n) {
            k = 0;
            epoch++;
            pos = 0;
        }
        size_t j = part_at(ds, epoch, k);
        struct part *q = &ds->parts[j];
        uint64_t start = pos;
        pos += q->rows;
        if (j == current || (sharing && !share_touches(ds, start, q->rows, total)))
            continue;
        ahead += q->rows;
        counted = counted && q->known;
        if (q->data || dataset_part_empty(ds, j) || (ds->scratch && ds->scratch_part == j))
            continue;
        window++;
        struct pcache_dest into = {ds->flat ? ds->flat + q->flat_at : NULL, q->rows};
        parse_ahead_submit(ds->pool, &q->ahead, &into); /* queued, running or done already: nothing changes */
    }
}

void dataset_rows_free(struct rows_bin *bin, void *rows, struct pcache_map *map)
{
    if (map->base)
        pcache_release(map);
    else
        rows_release(bin, rows);
}

/* Parsed rows of partition i: resident, the scratch copy, parsed ahead by a worker, or parsed now. */
static int part_rows(struct dataset *ds, size_t i, const char **rows_out, struct err *e)
{
    struct part *p = &ds->parts[i];
    if (p->data) {
        *rows_out = p->data;
        return ERR_OK;
    }
    if (ds->scratch && ds->scratch_part == i) {
        *rows_out = ds->scratch;
        return ERR_OK;
    }
    read_ahead(ds, i);
    struct csv_format f = dataset_part_format(ds, i);
    void *buf = NULL;
    struct pcache_map map = {0};
    uint64_t rows = 0;
    int rc;
    /* A failure on a worker may be stale (a file back by now): the reader tries once more itself. */
    if (ds->pool && parse_ahead_claim(ds->pool, &p->ahead) && p->ahead.rc == ERR_OK) {
        buf = p->ahead.rows;
        map = p->ahead.map;
        rows = p->ahead.n;
        rc = ERR_OK;
        p->ahead.rows = NULL;
        p->ahead.map.base = NULL;
    } else {
        struct pcache_dest into = {ds->flat ? ds->flat + p->flat_at : NULL, p->rows};
        rc = pcache_load(&ds->cache, &ds->url, p->obj, &f, ds->stride, p->from_shards ? p->rows : 0, &into,
                         &ds->bin, &buf, &map, &rows, e);
    }
    bool placed = ds->flat && buf == ds->flat + p->flat_at; /* read into its place (pcache_load's into) */
    if (rc == ERR_OK && (rc = part_settle_rows(ds, i, &f, rows, e)) != ERR_OK && !placed)
        dataset_rows_free(&ds->bin, buf, &map);
    if (rc)
        return rc;
    /* A mapped partition is held (and locked against eviction) exactly as long as parsed rows would be. */
    size_t bytes = (size_t)rows * ds->stride;
    if (ds->flat) {
        dataset_place(ds, i, &buf, &map);
    } else if (bytes <= ds->resident_limit - ds->resident_bytes) {
        p->data = buf;
        p->map = map;
        ds->resident_bytes += bytes;
    } else {
        dataset_rows_free(&ds->bin, ds->scratch, &ds->scratch_map);
        ds->scratch = buf;
        ds->scratch_map = map;
        ds->scratch_part = i;
    }
    *rows_out = buf;
    return ERR_OK;
}

void dataset_close(struct dataset *ds)
{
    if (!ds)
        return;
    parse_ahead_stop(ds->pool); /* joined: the tasks are ours again */
    for (size_t i = 0; ds->flat && i < ds->n; i++)
        ds->parts[i].data = NULL; /* inside flat */
    free(ds->flat);
    for (size_t i = 0; ds->parts && i < ds->n; i++) {
        dataset_rows_free(NULL, ds->parts[i].data, &ds->parts[i].map);
        dataset_rows_free(NULL, ds->parts[i].ahead.rows, &ds->parts[i].ahead.map);
    }
    free(ds->parts);
    for (size_t i = 0; ds->footers && i < ds->list.n; i++)
        parquet_footer_free(ds->footers[i]);
    free(ds->footers);
    dataset_rows_free(NULL, ds->scratch, &ds->scratch_map);
    if (ds->bin_ok)
        rows_bin_destroy(&ds->bin);
    free(ds->perm);
    free(ds->share_starts);
    free(ds->cols);
    free(ds->buf_rows);
    store_listing_free(&ds->list);
    store_url_free(&ds->url);
    free(ds->url_text);
    free(ds);
}

size_t dataset_num_features(const struct dataset *ds)
{
    return ds->fmt.n_cols - 1;
}

size_t dataset_num_partitions(const struct dataset *ds)
{
    return ds->n;
}

uint64_t dataset_num_rows(const struct dataset *ds)
{
    uint64_t total = 0;
    for (size_t i = 0; i < ds->n; i++) {
        if (!ds->parts[i].known)
            return 0;
        total += ds->parts[i].rows;
    }
    return total;
}

uint64_t dataset_partition_rows(const struct dataset *ds, size_t i)
{
    return i < ds->n && ds->parts[i].known ? ds->parts[i].rows : 0;
}

const char *dataset_partition_name(const struct dataset *ds, size_t i)
{
    return i < ds->n ? ds->parts[i].obj->name : NULL;
}

size_t dataset_batch_bytes(const struct dataset *ds)
{
    size_t n = ds->share_n ? (size_t)ds->share_n : 1; /* a share holds ceil(rows / n) rows at most */
    return (ds->batch_size + n - 1) / n * ds->stride;
}

size_t dataset_row_bytes(const struct dataset *ds)
{
    return ds->stride;
}

size_t dataset_resident_bytes(const struct dataset *ds)
{
    return ds->resident_bytes;
}

void dataset_stats(const struct dataset *ds, struct dataset_stats *s)
{
    s->parsed = __atomic_load_n(&ds->cache.parsed, __ATOMIC_RELAXED);
    s->cache_hits = __atomic_load_n(&ds->cache.hits, __ATOMIC_RELAXED);
    s->cache_misses = __atomic_load_n(&ds->cache.misses, __ATOMIC_RELAXED);
    s->cache_evictions = __atomic_load_n(&ds->cache.evictions, __ATOMIC_RELAXED);
    s->bytes_fetched = __atomic_load_n(&ds->cache.fetched, __ATOMIC_RELAXED);
    s->bytes_total = ds->bytes_total;
}

void dataset_tell(const struct dataset *ds, struct dataset_cursor *c)
{
    c->epoch = ds->epoch;
    c->batch = ds->batch;
}

static void next_epoch(struct dataset *ds)
{
    ds->epoch++;
    ds->batch = 0;
    ds->pi = 0;
    ds->row = 0;
    ds->buf_n = 0;
    ds->buf_primed = false;
}

/* The rows left in the epoch from the cursor, up to `want` (counting partitions as needed). */
static int rows_left(struct dataset *ds, uint64_t want, uint64_t *left, struct err *e)
{
    *left = ds->buf_primed ? ds->buf_n : 0;
    for (size_t k = ds->pi; k < ds->n && *left < want; k++) {
        size_t i = part_at(ds, ds->epoch, k);
        int rc = part_count(ds, i, e);
        if (rc)
            return rc;
        *left += ds->parts[i].rows - (k == ds->pi ? ds->row : 0);
    }
    if (*left > want)
        *left = want;
    return ERR_OK;
}

/* True when fewer than `want` rows are left in the epoch from the cursor. */
static int fewer_left_than(struct dataset *ds, uint64_t want, bool *fewer, struct err *e)
{
    uint64_t left;
    int rc = rows_left(ds, want, &left, e);
    *fewer = left < want;
    return rc;
}

/* The rest of the stream's current partition, in place: *avail rows at *src; empty partitions are passed over,
   and 0 rows means the epoch's end. */
static int stream_run(struct dataset *ds, const char **src, uint64_t *avail, struct err *e)
{
    *avail = 0;
    for (; ds->pi < ds->n; ds->pi++, ds->row = 0) {
        size_t i = part_at(ds, ds->epoch, ds->pi);
        if (dataset_part_empty(ds, i))
            continue;
        const char *rows;
        int rc = part_rows(ds, i, &rows, e);
        if (rc)
            return rc;
        if (ds->row < ds->parts[i].rows) {
            *src = rows + ds->row * ds->stride;
            *avail = ds->parts[i].rows - ds->row;
            return ERR_OK;
        }
    }
    return ERR_OK;
}

void dataset_share(size_t rows, int rank, int n, size_t *lo, size_t *count)
{
    size_t q = rows / (size_t)n, rem = rows % (size_t)n, r = (size_t)rank;
    *lo = r * q + (r * rem) / (size_t)n;
    *count = (r + 1) * q + ((r + 1) * rem) / (size_t)n - *lo;
}

/*
 * stream_take for a replica's share: the batch's rows are counted first, and of each run of a
 * partition's rows only those in the share are copied, the share's first to dst; a run outside
 * it moves the cursor unread.
 */
static int stream_take_share(struct dataset *ds, char *dst, size_t want, size_t *got, struct err *e)
{
    uint64_t total;
    size_t lo, count;
    int rc = rows_left(ds, want, &total, e);
    if (rc)
        return rc;
    dataset_share((size_t)total, ds->share_rank, ds->share_n, &lo, &count);
    for (*got = 0; *got < total && ds->pi < ds->n;) {
        size_t i = part_at(ds, ds->epoch, ds->pi);
        uint64_t avail = ds->parts[i].rows - ds->row; /* known: rows_left counted it */
        size_t take = avail < total - *got ? (size_t)avail : (size_t)(total - *got);
        size_t a = *got > lo ? *got : lo, b = *got + take < lo + count ? *got + take : lo + count;
        const char *rows;
        if (a < b && (rc = part_rows(ds, i, &rows, e)) != ERR_OK)
            return rc;
        if (a < b)
            memcpy(dst + (a - lo) * ds->stride, rows + (ds->row + (a - *got)) * ds->stride, (b - a) * ds->stride);
        *got += take;
        ds->row += take;
        if (take == avail) {
            ds->pi++;
            ds->row = 0;
        }
    }
    return ERR_OK;
}

/*
 * Copies up to `want` rows of the epoch's row stream into dst, crossing partitions, stopping at the
 * epoch's end; or, with view, copies nothing and points *view at the first row, the rows being contiguous.
 */
static int stream_take(struct dataset *ds, char *dst, const char **view, size_t want, size_t *got,
                       struct err *e)
{
    *got = 0;
    while (*got < want) {
        const char *src;
        uint64_t avail;
        int rc = stream_run(ds, &src, &avail, e);
        if (rc)
            return rc;
        if (avail == 0)
            break;
        size_t take = want - *got;
        if (avail < take)
            take = (size_t)avail;
        if (!view)
            memcpy(dst + *got * ds->stride, src, take * ds->stride);
        else if (*got == 0)
            *view = src;
        else if (src != *view + *got * ds->stride)
            return err_set(e, ERR_INTERNAL, "%s: a view's rows are not contiguous", ds->url_text);
        *got += take;
        ds->row += take;
        if (take == avail) {
            ds->pi++;
            ds->row = 0;
        }
    }
    return ERR_OK;
}

/*
 * Moves the stream over the empty partitions at its position, loading unknown ones as the next batch
 * would (parsed cache first), so an epoch's last batch is known as the last when served. One that
 * cannot be read is the next batch's error.
 */
static void skip_empty(struct dataset *ds)
{
    struct err later = {0};
    for (; ds->pi < ds->n && ds->row == 0; ds->pi++) {
        size_t i = part_at(ds, ds->epoch, ds->pi);
        const char *rows;
        if ((!ds->parts[i].known && part_rows(ds, i, &rows, &later) != ERR_OK) || ds->parts[i].rows)
            break;
    }
}

/*
 * Draws up to batch_size rows from the shuffle buffer, each replaced by the next
 * row of the stream; once the stream is dry the buffer drains in random order.
 * The first call of an epoch fills it from the stream, so every row comes once.
 * Rows are taken from the current partition in place, one run at a time.
 * A replica makes every draw (the buffer needs every row, the draws are the
 * whole batch's) but copies out only those that fall in its share, from dst on.
 */
static int fill_shuffled(struct dataset *ds, char *dst, size_t *filled, struct err *e)
{
    const size_t st = ds->stride;
    int rc;
    *filled = 0;
    if (!ds->buf_primed) {
        if ((rc = stream_take(ds, ds->buf_rows, NULL, ds->buf_alloc, &ds->buf_n, e)) != ERR_OK)
            return rc;
        ds->buf_primed = true;
        shuffle_rng_init(&ds->buf_rng, ds->seed, ds->epoch, SHUFFLE_ROWS);
    }
    size_t lo = 0, count = ds->batch_size;
    if (ds->share_n) {
        uint64_t total;
        if ((rc = rows_left(ds, ds->batch_size, &total, e)) != ERR_OK)
            return rc;
        dataset_share((size_t)total, ds->share_rank, ds->share_n, &lo, &count);
    }
    const char *src = NULL;
    uint64_t avail = 0;
    while (*filled < ds->batch_size && ds->buf_n > 0) {
        char *slot = ds->buf_rows + (size_t)shuffle_rng_below(&ds->buf_rng, ds->buf_n) * st;
        if (*filled >= lo && *filled < lo + count)
            memcpy(dst + (*filled - lo) * st, slot, st);
        ++*filled;
        if (avail == 0 && (rc = stream_run(ds, &src, &avail, e)) != ERR_OK)
            return rc;
        if (avail == 0) {
            ds->buf_n--;
            memmove(slot, ds->buf_rows + ds->buf_n * st, st);
            continue;
        }
        memcpy(slot, src, st);
        src += st;
        ds->row++;
        if (--avail == 0) {
            ds->pi++;
            ds->row = 0;
        }
    }
    return ERR_OK;
}

/* The next batch's rows from the cursor on: straight from the stream (or a view of it), or through the shuffle buffer. */
static int fill(struct dataset *ds, char *dst, const char **view, size_t *filled, struct err *e)
{
    if (ds->buf_cap && !view)
        return fill_shuffled(ds, dst, filled, e);
    if (ds->share_n && !view)
        return stream_take_share(ds, dst, ds->batch_size, filled, e);
    return stream_take(ds, dst, view, ds->batch_size, filled, e);
}

int dataset_next_batch(struct dataset *ds, void *dst, size_t *rows, struct dataset_cursor *at, struct err *e)
{
    return dataset_take_batch(ds, dst, NULL, rows, at, e);
}

int dataset_take_batch(struct dataset *ds, void *dst, const char **view, size_t *rows,
                       struct dataset_cursor *at, struct err *e)
{
    int rc = ERR_OK;
    if (ds->buf_stale) {
        struct dataset_cursor c = {ds->epoch, ds->batch};
        if ((rc = dataset_seek(ds, &c, e)) != ERR_OK)
            return rc;
    }
    const uint64_t epoch0 = ds->epoch, batch0 = ds->batch, row0 = ds->row;
    const size_t pi0 = ds->pi;
    for (;;) {
        struct dataset_cursor here = {ds->epoch, ds->batch};
        size_t filled;
        if ((rc = fill(ds, dst, view, &filled, e)) != ERR_OK)
            break;
        if (filled < ds->batch_size && ds->drop_last) {
            /* Only reached when counts were unknown ahead of time; the short tail is dropped. */
            if (here.batch == 0) {
                rc = err_set(e, ERR_INVALID_ARG, "%s: %zu rows, fewer than one batch of %zu (drop_last)",
                             ds->url_text, filled, ds->batch_size);
                break;
            }
            next_epoch(ds);
            continue;
        }
        if (filled == 0) { /* never a batch of nothing: open found rows, and each batch skips the empties after it */
            rc = err_set(e, ERR_INVALID_DATA, "%s: no rows left in epoch %llu (did a partition change?)",
                         ds->url_text, (unsigned long long)ds->epoch);
            break;
        }
        ds->batch++;
        if (ds->buf_n == 0)
            skip_empty(ds);
        bool end = ds->pi == ds->n && ds->buf_n == 0;
        if (!end && ds->drop_last) {
            bool fewer;
            if ((rc = fewer_left_than(ds, ds->batch_size, &fewer, e)) != ERR_OK)
                break;
            end = fewer;
        }
        if (end)
            next_epoch(ds);
        *rows = filled;
        if (at)
            *at = here;
        return ERR_OK;
    }
    ds->epoch = epoch0;
    ds->batch = batch0;
    ds->pi = pi0;
    ds->row = row0;
    /* The buffer has moved on with the failed batch; the next call rebuilds it at the cursor. */
    ds->buf_stale = ds->buf_cap != 0;
    return rc;
}

struct buffered {
    uint64_t pos; /* row index in the epoch's stream */
    size_t slot;
};

static int by_pos(const void *a, const void *b)
{
    const struct buffered *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/*
 * Rebuilds the shuffle buffer as sequential reading leaves it after `skip` rows of
 * the epoch: the same draws, made on stream positions instead of rows, then the
 * surviving positions' rows copied in, partition by partition in stream order.
 */
static int buffer_replay(struct dataset *ds, uint64_t epoch, uint64_t skip, struct err *e)
{
    uint64_t total = 0;
    for (size_t k = 0; k < ds->n; k++) {
        size_t i = part_at(ds, epoch, k);
        int rc = part_count(ds, i, e);
        if (rc)
            return rc;
        total += ds->parts[i].rows;
    }
    size_t n = ds->buf_cap < total ? ds->buf_cap : (size_t)total;
    struct buffered *b = malloc(n * sizeof *b);
    if (!b)
        return err_set(e, ERR_NOMEM, "out of memory replaying a shuffle buffer of %zu rows", n);
    for (size_t j = 0; j < n; j++)
        b[j] = (struct buffered){j, j};
    uint64_t next = n;
    struct shuffle_rng r;
    shuffle_rng_init(&r, ds->seed, epoch, SHUFFLE_ROWS);
    for (uint64_t t = 0; t < skip && n > 0; t++) {
        size_t j = (size_t)shuffle_rng_below(&r, n);
        b[j].pos = next < total ? next++ : b[--n].pos;
    }
    qsort(b, n, sizeof *b, by_pos);
    size_t k = 0, i = part_at(ds, epoch, 0);
    uint64_t base = 0;
    const char *rows = NULL;
    int rc = ERR_OK;
    for (size_t j = 0; j < n && rc == ERR_OK; j++) {
        while (b[j].pos >= base + ds->parts[i].rows) {
            base += ds->parts[i].rows;
            i = part_at(ds, epoch, ++k);
            rows = NULL;
        }
        if (!rows && (rc = part_rows(ds, i, &rows, e)) != ERR_OK)
            break;
        memcpy(ds->buf_rows + b[j].slot * ds->stride, rows + (b[j].pos - base) * ds->stride, ds->stride);
    }
    free(b);
    if (rc)
        return rc;
    /* the stream goes on at position `next` */
    ds->pi = 0;
    ds->row = next;
    while (ds->pi < ds->n && ds->row >= ds->parts[part_at(ds, epoch, ds->pi)].rows)
        ds->row -= ds->parts[part_at(ds, epoch, ds->pi++)].rows;
    ds->buf_n = n;
    ds->buf_primed = true;
    ds->buf_rng = r;
    return ERR_OK;
}

int dataset_seek(struct dataset *ds, const struct dataset_cursor *c, struct err *e)
{
    if (c->batch > UINT64_MAX / ds->batch_size)
        return err_set(e, ERR_INVALID_ARG, "batch %llu is out of range", (unsigned long long)c->batch);
    uint64_t skip = c->batch * ds->batch_size, before = 0;
    size_t k = 0;
    for (; k < ds->n; k++) {
        size_t i = part_at(ds, c->epoch, k);
        int rc = part_count(ds, i, e);
        if (rc)
            return rc;
        if (skip - before < ds->parts[i].rows)
            break;
        before += ds->parts[i].rows;
    }
    if (k == ds->n)
        return err_set(e, ERR_INVALID_ARG, "%s: batch %llu starts past the end of the epoch (%llu rows)",
                       ds->url_text, (unsigned long long)c->batch, (unsigned long long)before);
    uint64_t save_epoch = ds->epoch, save_batch = ds->batch, save_row = ds->row;
    size_t save_pi = ds->pi;
    ds->epoch = c->epoch;
    ds->batch = c->batch;
    ds->pi = k;
    ds->row = skip - before;
    ds->buf_n = 0;
    ds->buf_primed = false;
    int rc = ERR_OK;
    if (ds->buf_cap && (skip > 0 || ds->buf_stale))
        rc = buffer_replay(ds, c->epoch, skip, e);
    if (rc == ERR_OK && ds->drop_last) {
        bool fewer;
        rc = fewer_left_than(ds, ds->batch_size, &fewer, e);
        if (rc == ERR_OK && fewer)
            rc = err_set(e, ERR_INVALID_ARG, "%s: batch %llu is a short tail that drop_last drops",
                         ds->url_text, (unsigned long long)c->batch);
    }
    if (rc) {
        ds->epoch = save_epoch;
        ds->batch = save_batch;
        ds->pi = save_pi;
        ds->row = save_row;
        ds->buf_stale = ds->buf_cap != 0;
        return rc;
    }
    ds->buf_stale = false;
    return ERR_OK;
}
