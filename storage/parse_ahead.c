/* parse_ahead.c — a small pool of parser threads fed from a FIFO of partitions, and the parse of one partition. */
#include "parse_ahead.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hugemem.h"
#include "parquet.h"
#include "thread.h"

struct parse_ahead {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    struct parse_task *head, *tail;
    bool stop;
    size_t n_threads;
    pthread_t *threads;
};

/* Rows follow a header that holds their capacity in bytes (64 keeps them cache-line aligned). */
#define ROWS_HEADER 64

static size_t rows_cap(const void *rows)
{
    size_t cap;
    memcpy(&cap, (const char *)rows - ROWS_HEADER, sizeof cap);
    return cap;
}

int rows_bin_init(struct rows_bin *b, struct err *e)
{
    memset(b, 0, sizeof *b);
    int rc = pthread_mutex_init(&b->mu, NULL);
    if (rc)
        return err_set(e, ERR_INTERNAL, "%s:%d: pthread_mutex_init: %s", __FILE__, __LINE__, strerror(rc));
    return ERR_OK;
}

void rows_bin_trim(struct rows_bin *b)
{
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < b->n; i++)
        free((char *)b->spare[i] - ROWS_HEADER);
    b->n = 0;
    pthread_mutex_unlock(&b->mu);
}

void rows_bin_destroy(struct rows_bin *b)
{
    rows_bin_trim(b);
    pthread_mutex_destroy(&b->mu);
}

void rows_release(struct rows_bin *b, void *rows)
{
    if (!rows)
        return;
    if (b) {
        pthread_mutex_lock(&b->mu);
        bool kept = b->n < ROWS_BIN_SPARES;
        if (kept)
            b->spare[b->n++] = rows;
        pthread_mutex_unlock(&b->mu);
        if (kept)
            return;
    }
    free((char *)rows - ROWS_HEADER);
}

/* The smallest spare that holds `bytes`, taken out of the bin, or NULL. */
static void *rows_reuse(struct rows_bin *b, size_t bytes)
{
    if (!b)
        return NULL;
    pthread_mutex_lock(&b->mu);
    size_t best = b->n;
    for (size_t i = 0; i < b->n; i++)
        if (rows_cap(b->spare[i]) >= bytes && (best == b->n || rows_cap(b->spare[i]) < rows_cap(b->spare[best])))
            best = i;
    void *p = NULL;
    if (best < b->n) {
        p = b->spare[best];
        b->spare[best] = b->spare[--b->n];
    }
    pthread_mutex_unlock(&b->mu);
    return p;
}

/*
 * Memory for a partition's rows: a spare, or fresh. Large fresh ones are asked to
 * be huge pages: a cold epoch otherwise spends a third of its time faulting and
 * zeroing 4 KiB pages one at a time.
 */
static void *rows_alloc(struct rows_bin *b, size_t bytes)
{
    void *rows = rows_reuse(b, bytes);
    if (rows)
        return rows;
    char *p = bytes <= SIZE_MAX - ROWS_HEADER ? hugemem_alloc(bytes + ROWS_HEADER) : NULL;
    if (!p)
        return NULL;
    memcpy(p, &bytes, sizeof bytes);
    return p + ROWS_HEADER;
}

int partition_measure(const struct csv_format *fmt, const char *buf, size_t len, struct csv_layout *lay, uint64_t *rows,
                      struct err *e)
{
    if (fmt->format == DATASET_FORMAT_PARQUET)
        return parquet_measure(fmt, buf, len, lay, rows, e);
    return csv_measure(fmt, buf, len, lay, rows, e);
}

static int shards_disagree(const struct csv_format *fmt, uint64_t rows, uint64_t expect, struct err *e)
{
    return err_set(e, ERR_INVALID_DATA, "%s: %llu rows, but shards metadata says %llu", fmt->name,
                   (unsigned long long)rows, (unsigned long long)expect);
}

/* A Parquet partition: its footer says how many rows, so nothing is counted before decoding. */
static int parse_parquet(const struct csv_format *fmt, const struct store_blob *b, size_t stride, uint64_t expect,
                         struct rows_bin *bin, void **rows_out, uint64_t *n_out, struct err *e)
{
    struct csv_layout lay;
    uint64_t rows;
    void *buf = NULL;
    int rc = parquet_measure(fmt, b->data, b->len, &lay, &rows, e);
    if (rc == ERR_OK && expect && rows != expect)
        rc = shards_disagree(fmt, rows, expect, e);
    if (rc || rows == 0)
        return rc;
    if (rows > SIZE_MAX / stride)
        return err_set(e, ERR_NOMEM, "%s: too many rows to hold", fmt->name);
    if (!(buf = rows_alloc(bin, (size_t)rows * stride)))
        return err_set(e, ERR_NOMEM, "%s: out of memory for %llu rows", fmt->name, (unsigned long long)rows);
    if ((rc = parquet_parse_rows(fmt, b->data, b->len, buf, rows, e)) != ERR_OK) {
        rows_release(bin, buf);
        return rc;
    }
    *rows_out = buf;
    *n_out = rows;
    return ERR_OK;
}

static void add_fetched(uint64_t *fetched, uint64_t n)
{
    if (fetched)
        __atomic_fetch_add(fetched, n, __ATOMIC_RELAXED);
}

/* One row group of a Parquet file whose footer the dataset read at open: its selected chunks only. */
static int parse_group(const struct store_url *url, const struct store_object *obj, const struct csv_format *fmt,
                       size_t stride, struct rows_bin *bin, void **rows_out, uint64_t *n_out, uint64_t *fetched,
                       struct err *e)
{
    uint64_t rows = parquet_footer_group_rows(fmt->footer, fmt->group);
    if (rows == 0)
        return ERR_OK;
    if (rows > SIZE_MAX / stride)
        return err_set(e, ERR_NOMEM, "%s: row group %zu: too many rows to hold", fmt->name, fmt->group);
    void *buf = rows_alloc(bin, (size_t)rows * stride);
    if (!buf)
        return err_set(e, ERR_NOMEM, "%s: row group %zu: out of memory for %llu rows", fmt->name, fmt->group,
                       (unsigned long long)rows);
    struct store_reader *r;
    int rc = store_reader_open(url, obj, &r, e);
    if (rc == ERR_OK) {
        rc = parquet_parse_group(fmt, fmt->footer, fmt->group, store_reader_read_cb, r, buf, rows, e);
        add_fetched(fetched, store_reader_fetched(r));
        store_reader_close(r);
    }
    if (rc) {
        rows_release(bin, buf);
        return rc;
    }
    *rows_out = buf;
    *n_out = rows;
    return ERR_OK;
}

int parse_partition(const struct store_url *url, const struct store_object *obj, const struct csv_format *fmt,
                    size_t stride, uint64_t expect, struct rows_bin *bin, void **rows_out, uint64_t *n_out,
                    uint64_t *fetched, struct err *e)
{
    *rows_out = NULL;
    *n_out = 0;
    if (fmt->format == DATASET_FORMAT_PARQUET && fmt->footer)
        return parse_group(url, obj, fmt, stride, bin, rows_out, n_out, fetched, e);
    struct store_blob b;
    struct csv_layout lay;
    int rc = store_map(url, obj, &b, e);
    if (rc)
        return rc;
    add_fetched(fetched, b.len);
    if (fmt->format == DATASET_FORMAT_PARQUET) {
        rc = parse_parquet(fmt, &b, stride, expect, bin, rows_out, n_out, e);
        store_unmap(&b);
        return rc;
    }
    uint64_t rows = expect;
    void *buf = NULL;
    if (!expect) {
        /* No promise: a file without rows is an empty partition, which the dataset skips. */
        rc = csv_measure(fmt, b.data, b.len, &lay, &rows, e);
        if (rc == ERR_OK && rows == 0) {
            store_unmap(&b);
            return ERR_OK;
        }
    } else if ((rc = csv_probe(fmt, b.data, b.len, &lay, e)) == ERR_OK && expect > b.len / (2 * lay.ncols) + 1) {
        /* A row takes at least two bytes a column: a larger promise is wrong, and counting says how. */
        rc = csv_count_rows(fmt, &lay, b.data, b.len, &rows, e);
        if (rc == ERR_OK && rows != expect)
            rc = shards_disagree(fmt, rows, expect, e);
    }
    /* With a selection the parser writes every column first, then packs the rows (csv_parse_rows). */
    size_t width = rc == ERR_OK && fmt->cols ? lay.ncols * (fmt->dtype == STORE_F32 ? sizeof(float) : sizeof(double))
                                             : stride;
    if (width < stride)
        width = stride;
    if (rc == ERR_OK && rows > SIZE_MAX / width)
        rc = err_set(e, ERR_NOMEM, "%s: too many rows to hold", fmt->name);
    if (rc == ERR_OK && !(buf = rows_alloc(bin, (size_t)rows * width)))
        rc = err_set(e, ERR_NOMEM, "%s: out of memory for %llu rows", fmt->name, (unsigned long long)rows);
    if (rc == ERR_OK)
        rc = csv_parse_rows(fmt, &lay, b.data, b.len, buf, rows, e);
    uint64_t counted;
    struct err ce = {0};
    /* A wrong count in the metadata is the clearer message, as when counting came first. */
    if (rc == ERR_INVALID_DATA && expect && csv_count_rows(fmt, &lay, b.data, b.len, &counted, &ce) == ERR_OK &&
        counted != expect)
        rc = shards_disagree(fmt, counted, expect, e);
    store_unmap(&b);
    if (rc) {
        rows_release(bin, buf);
        return rc;
    }
    *rows_out = buf;
    *n_out = rows;
    return ERR_OK;
}

/* Pops the queue's head and parses it; called and returns with the mutex held. */
static void run_one(struct parse_ahead *pa)
{
    struct parse_task *t = pa->head;
    pa->head = t->next;
    if (!pa->head)
        pa->tail = NULL;
    t->next = NULL;
    t->state = PARSE_RUNNING;
    pthread_mutex_unlock(&pa->mu);

    struct err e = {0};
    void *rows;
    uint64_t n;
    struct pcache_map map;
    int rc = pcache_load(t->cache, t->url, t->obj, &t->fmt, t->stride, t->expect, &t->into, t->bin, &rows, &map,
                         &n, &e);

    pthread_mutex_lock(&pa->mu);
    t->rows = rows;
    t->map = map;
    t->n = n;
    t->rc = rc;
    t->err = e;
    t->state = PARSE_DONE;
    pthread_cond_broadcast(&pa->done_cv);
}

static void *worker(void *arg)
{
    struct parse_ahead *pa = arg;
    pthread_mutex_lock(&pa->mu);
    for (;;) {
        while (!pa->stop && !pa->head)
            pthread_cond_wait(&pa->work_cv, &pa->mu);
        if (pa->stop)
            break;
        run_one(pa);
    }
    pthread_mutex_unlock(&pa->mu);
    return NULL;
}

int parse_ahead_start(size_t threads, struct parse_ahead **out, struct err *e)
{
    *out = NULL;
    struct parse_ahead *pa = calloc(1, sizeof *pa);
    if (!pa || !(pa->threads = calloc(threads, sizeof *pa->threads))) {
        free(pa);
        return err_set(e, ERR_NOMEM, "out of memory starting parser threads");
    }
    int rc = pthread_mutex_init(&pa->mu, NULL);
    if (rc == 0 && (rc = pthread_cond_init(&pa->work_cv, NULL)) != 0)
        pthread_mutex_destroy(&pa->mu);
    if (rc == 0 && (rc = pthread_cond_init(&pa->done_cv, NULL)) != 0) {
        pthread_cond_destroy(&pa->work_cv);
        pthread_mutex_destroy(&pa->mu);
    }
    if (rc) {
        free(pa->threads);
        free(pa);
        return err_set(e, ERR_INTERNAL, "%s:%d: parser threads: %s", __FILE__, __LINE__, strerror(rc));
    }
    /* SIGTERM and SIGINT stay with the daemon's loop thread. */
    for (; pa->n_threads < threads; pa->n_threads++)
        if ((rc = thread_start(&pa->threads[pa->n_threads], worker, pa)) != 0)
            break;
    if (rc) {
        parse_ahead_stop(pa);
        return err_set(e, rc == EAGAIN ? ERR_NOMEM : ERR_INTERNAL, "%s:%d: parser threads: %s", __FILE__,
                       __LINE__, strerror(rc));
    }
    *out = pa;
    return ERR_OK;
}

void parse_ahead_submit(struct parse_ahead *pa, struct parse_task *t, const struct pcache_dest *into)
{
    pthread_mutex_lock(&pa->mu);
    if (t->state == PARSE_IDLE) {
        t->into = into ? *into : (struct pcache_dest){0};
        t->state = PARSE_QUEUED;
        t->next = NULL;
        if (pa->tail)
            pa->tail->next = t;
        else
            pa->head = t;
        pa->tail = t;
        pthread_cond_signal(&pa->work_cv);
    }
    pthread_mutex_unlock(&pa->mu);
}

static void unqueue(struct parse_ahead *pa, struct parse_task *t)
{
    struct parse_task *prev = NULL;
    for (struct parse_task *q = pa->head; q; prev = q, q = q->next) {
        if (q != t)
            continue;
        if (prev)
            prev->next = q->next;
        else
            pa->head = q->next;
        if (pa->tail == q)
            pa->tail = prev;
        break;
    }
    t->next = NULL;
    t->state = PARSE_IDLE;
}

bool parse_ahead_claim(struct parse_ahead *pa, struct parse_task *t)
{
    pthread_mutex_lock(&pa->mu);
    if (t->state == PARSE_QUEUED)
        unqueue(pa, t);
    while (t->state == PARSE_RUNNING) {
        if (pa->head)
            run_one(pa); /* the reader would only wait: make it a parser too */
        else
            pthread_cond_wait(&pa->done_cv, &pa->mu);
    }
    bool done = t->state == PARSE_DONE;
    if (done)
        t->state = PARSE_IDLE;
    pthread_mutex_unlock(&pa->mu);
    return done;
}

void parse_ahead_stop(struct parse_ahead *pa)
{
    if (!pa)
        return;
    pthread_mutex_lock(&pa->mu);
    pa->stop = true;
    while (pa->head)
        unqueue(pa, pa->head);
    pthread_cond_broadcast(&pa->work_cv);
    pthread_mutex_unlock(&pa->mu);
    for (size_t i = 0; i < pa->n_threads; i++)
        pthread_join(pa->threads[i], NULL);
    pthread_cond_destroy(&pa->work_cv);
    pthread_cond_destroy(&pa->done_cv);
    pthread_mutex_destroy(&pa->mu);
    free(pa->threads);
    free(pa);
}
