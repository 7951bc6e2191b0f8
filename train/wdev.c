/* wdev.c — a worker's device: its backend, ring slots in the backend's host memory and batch uploads, all through core's table. */
#include "wdev.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

struct wdev {
    const struct backend *be;
    const struct backend_factory *made_by;   /* destroys be */
    struct prefetch_allocator ring;   /* adapts be's host memory to storage's allocator shape */
};

struct wdev_upload {
    struct wdev *dev;
    void *buf[2];                     /* device memory from be->alloc, a full batch each */
    size_t bytes;
    struct be_event *copied[2];      /* after the latest copy into buf[i] */
    struct be_event *read[2];        /* after the latest step that read buf[i] */
    bool wait_all[2];                 /* buf[i]'s latest readers are not in read[i] (an evaluation) */
    int cur;                          /* the buffer the latest finish gave */
    int pending;                      /* the buffer an unfinished start copies into; -1 none */
    bool in_place;                    /* host memory is the device's: no buffers, batches stay in their slots */
    const void *src;                  /* in place: the unfinished start's batch */
    const void *given[2];             /* in place: what the latest finishes gave, by buffer */
};

/* storage's allocator has no struct err: the reason goes to the log, NULL to the ring. */
static void *ring_alloc(void *ctx, size_t bytes)
{
    struct wdev *d = ctx;
    struct err e = {0};
    void *p = d->be->host_alloc(d->be, bytes, &e);
    if (!p)
        log_warn("%s: ring slot of %zu bytes in host memory: %s", d->be->name, bytes, e.msg);
    return p;
}

static void ring_free(void *ctx, void *p)
{
    struct wdev *d = ctx;
    d->be->host_free(d->be, p);
}

int wdev_open(const struct backend_factory *f, int index, struct wdev **out, struct err *e)
{
    *out = NULL;
    if (!f)
        return err_set(e, ERR_DEVICE, "cuda:%d: this traind was built without CUDA", index);
    struct wdev *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(e, ERR_NOMEM, "%s:%d: out of memory", f->kind, index);
    if (f->create(index, &d->be, e)) {
        free(d);
        return e->code;
    }
    d->made_by = f;
    d->ring = (struct prefetch_allocator){.alloc = ring_alloc, .free = ring_free, .ctx = d};
    *out = d;
    return 0;
}

void wdev_close(struct wdev *d)
{
    if (!d)
        return;
    d->made_by->destroy(d->be);
    free(d);
}

const struct backend *wdev_backend(const struct wdev *d)
{
    return d->be;
}

int wdev_job_end(struct wdev *d, struct err *e)
{
    struct err first = {0};
    /* An error the device clears does not come back; a sticky one comes back on every call. */
    if (d->be->synchronize(d->be, &first) && d->be->synchronize(d->be, e))
        return err_set(e, ERR_DEVICE, "%s: the GPU's CUDA context is lost (%s): traind must restart to train on it",
                       d->be->name, first.msg);
    if (first.code)
        log_warn("%s: after the job: %s", d->be->name, first.msg);
    struct err ec = {0};
    if (d->be->empty_cache(d->be, &ec))
        log_warn("%s: after the job: %s", d->be->name, ec.msg);
    return ERR_OK;
}

void wdev_memory(const struct wdev *d, uint64_t *allocated, uint64_t *reserved)
{
    struct be_mem_stats st;
    d->be->memory_stats(d->be, &st);
    *allocated = st.allocated;
    *reserved = st.reserved;
}

const struct prefetch_allocator *wdev_ring_allocator(struct wdev *d)
{
    return &d->ring;
}

int wdev_upload_new(struct wdev *d, size_t bytes, struct wdev_upload **out, struct err *e)
{
    struct wdev_upload *u = calloc(1, sizeof *u);
    if (!u)
        return err_set(e, ERR_NOMEM, "%s: out of memory", d->be->name);
    u->dev = d;
    u->bytes = bytes;
    u->pending = -1;
    if ((u->in_place = d->be->host_memory)) {
        *out = u;
        return 0;
    }
    /* The blocks may come from the cache, last read by kernels still queued: the first copy into each
       waits for everything queued before it, as after an evaluation. */
    u->wait_all[0] = u->wait_all[1] = true;
    for (int i = 0; i < 2; i++) {
        if (!(u->buf[i] = d->be->alloc(d->be, bytes, e)) || d->be->event_new(d->be, &u->copied[i], e) ||
            d->be->event_new(d->be, &u->read[i], e)) {
            if (!e->code)
                err_set(e, ERR_OUT_OF_MEMORY, "%s: no device memory for two batches of %zu bytes",
                        d->be->name, bytes);
            wdev_upload_free(u);
            return e->code;
        }
    }
    *out = u;
    return 0;
}

/* The host waits until everything before ev has finished on the device. */
static int host_wait(const struct backend *be, struct be_event *ev, struct err *e)
{
    for (;;) {
        bool done = false;
        if (be->event_query(be, ev, &done, e))
            return e->code;
        if (done)
            return 0;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000};
        nanosleep(&ts, NULL);
    }
}

int wdev_upload_start(struct wdev_upload *u, const void *src, size_t bytes, struct err *e)
{
    if (u->pending >= 0)
        return err_set(e, ERR_INTERNAL, "an upload started before the last one finished");
    if (bytes > u->bytes)
        return err_set(e, ERR_INTERNAL, "a batch of %zu bytes in a buffer of %zu", bytes, u->bytes);
    int i = u->cur ^ 1;
    u->pending = i;   /* from here on, even after a failure: wdev_upload_abandon must wait */
    if (u->in_place) {
        u->src = src;
        return 0;
    }
    /* reusable NULL: after an evaluation, wait for every kernel queued so far (they may read buf[i]). */
    if (u->dev->be->upload_start(u->dev->be, u->buf[i], src, bytes, u->wait_all[i] ? NULL : u->read[i],
                             u->copied[i], e))
        return e->code;
    u->wait_all[i] = false;
    return 0;
}

int wdev_upload_step_done(struct wdev_upload *u, const void *dst, struct err *e)
{
    if (u->in_place && (dst == u->given[0] || dst == u->given[1]))
        return 0;   /* the step ran on the caller's thread: it is over */
    for (int i = 0; i < 2; i++)
        if (u->buf[i] == dst)
            return u->dev->be->compute_record(u->dev->be, u->read[i], e);
    return err_set(e, ERR_INTERNAL, "a step done on a buffer that is not a batch buffer");
}

int wdev_upload_finish(struct wdev_upload *u, void **dst, struct err *e)
{
    int i = u->pending;
    if (i < 0)
        return err_set(e, ERR_INTERNAL, "an upload finished that never started");
    if (u->in_place) {
        u->pending = -1;
        u->cur = i;
        *dst = (void *)u->src;   /* the ring slot: the step only reads it */
        u->given[i] = u->src;
        return 0;
    }
    if (host_wait(u->dev->be, u->copied[i], e) || u->dev->be->compute_wait(u->dev->be, u->copied[i], e))
        return e->code;
    u->pending = -1;
    u->cur = i;
    *dst = u->buf[i];
    return 0;
}

void wdev_upload_abandon(struct wdev_upload *u)
{
    if (!u || u->pending < 0)
        return;
    struct err e = {0};
    if (u->dev->be->synchronize(u->dev->be, &e))
        log_warn("%s: waiting for an abandoned batch copy: %s", u->dev->be->name, e.msg);
    u->pending = -1;
}

int wdev_upload(struct wdev_upload *u, const void *src, size_t bytes, void **dst, struct err *e)
{
    if (u->pending >= 0)
        return err_set(e, ERR_INTERNAL, "an upload while a started one is unfinished");
    if (bytes > u->bytes)
        return err_set(e, ERR_INTERNAL, "a batch of %zu bytes in a buffer of %zu", bytes, u->bytes);
    if (u->in_place) {
        *dst = (void *)src;   /* the caller's buffer: the evaluation only reads it */
        return 0;
    }
    int i = u->cur ^ 1;
    /* reusable NULL: the copy waits for every kernel queued so far (they may read buf[i]). */
    if (u->dev->be->upload_async(u->dev->be, u->buf[i], src, bytes, NULL, u->copied[i], e) ||
        host_wait(u->dev->be, u->copied[i], e))
        return e->code;
    u->wait_all[i] = true;
    *dst = u->buf[i];
    return 0;
}

bool wdev_upload_in_place(const struct wdev_upload *u)
{
    return u->in_place;
}

void wdev_upload_free(struct wdev_upload *u)
{
    if (!u)
        return;
    wdev_upload_abandon(u);
    for (int i = 0; i < 2; i++) {
        u->dev->be->event_free(u->dev->be, u->copied[i]);
        u->dev->be->event_free(u->dev->be, u->read[i]);
        if (u->buf[i])
            u->dev->be->free(u->dev->be, u->buf[i]);
    }
    free(u);
}

struct cached_batch {
    void *p;                          /* device memory from be->alloc_spare; NULL: not kept */
    size_t rows, held;                /* held: its block's size */
};

struct wdev_cache {
    struct wdev *dev;
    struct cached_batch *b;           /* by batch index */
    size_t cap;
    size_t count, bytes, budget;
    bool full;                        /* the budget or the device said no: nothing more is kept */
    uint64_t got[2];                  /* the last two indices wdev_cache_get handed out */
};

/*
 * The allocator's last resort (be->set_reclaim) when a step or an evaluation runs out
 * of device memory: every kept batch goes but the two handed out last, which kernels queued
 * from now on may still read (the step's batch and the one fetched ahead); the memory is
 * freed after the kernels queued so far (the backend frees in compute-stream order). Nothing more is kept,
 * and later epochs copy the dropped batches from host memory again, as the first did.
 */
static bool cache_reclaim(void *ctx)
{
    struct wdev_cache *c = ctx;
    size_t n = 0, bytes = 0;
    for (size_t i = 0; i < c->cap; i++) {
        if (!c->b[i].p || i == c->got[0] || i == c->got[1])
            continue;
        c->dev->be->free(c->dev->be, c->b[i].p);
        n++;
        bytes += c->b[i].held;
        c->b[i].p = NULL;
    }
    c->full = true;
    c->count -= n;
    c->bytes -= bytes;
    if (n)
        log_warn("%s: out of device memory: %zu batches (%.1f MB) of the training set kept on it "
                 "are dropped and will be copied from host memory again", c->dev->be->name, n,
                 (double)bytes / 1e6);
    return n > 0;
}

int wdev_cache_new(struct wdev *d, struct wdev_cache **out, struct err *e)
{
    *out = NULL;
    if (d->be->host_memory)
        return 0;   /* the data is in the device's memory already */
    size_t free_bytes = 0;
    if (d->be->free_memory(d->be, &free_bytes, e))
        return e->code;
    struct wdev_cache *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(e, ERR_NOMEM, "%s: out of memory", d->be->name);
    c->dev = d;
    c->budget = free_bytes / 2;       /* headroom for the model, the optimizer and other jobs' needs */
    c->got[0] = c->got[1] = UINT64_MAX;
    d->be->set_reclaim(d->be, cache_reclaim, c);
    *out = c;
    return 0;
}

int wdev_cache_put(struct wdev_cache *c, uint64_t index, const void *dev, size_t rows, size_t bytes,
                   bool *kept, struct err *e)
{
    *kept = false;
    if (index < c->cap && c->b[index].p) {
        *kept = true;   /* an epoch seen twice (a resumed job): the copy is already there */
        return 0;
    }
    size_t held = c->dev->be->alloc_size(c->dev->be, bytes);   /* what the block really takes */
    if (c->full || held == 0 || held > c->budget - c->bytes || index >= SIZE_MAX / sizeof *c->b / 2) {
        c->full = true;
        return 0;
    }
    if (index >= c->cap) {
        size_t cap = c->cap ? c->cap : 16;
        while (cap <= index)
            cap *= 2;
        struct cached_batch *nb = realloc(c->b, cap * sizeof *nb);
        if (!nb)
            return err_set(e, ERR_NOMEM, "out of memory for the device batch cache");
        memset(nb + c->cap, 0, (cap - c->cap) * sizeof *nb);
        c->b = nb;
        c->cap = cap;
    }
    /* Only memory nobody holds: the allocator's free blocks are the step's temporaries. */
    struct err ae = {0};
    void *p = c->dev->be->alloc_spare(c->dev->be, bytes, &ae);
    if (!p) {   /* the device is fuller than when the cache was made: keep what there is */
        c->full = true;
        return 0;
    }
    if (c->dev->be->copy_on_device(c->dev->be, p, dev, bytes, e)) {
        c->dev->be->free(c->dev->be, p);
        return e->code;
    }
    c->b[index] = (struct cached_batch){.p = p, .rows = rows, .held = held};
    c->count++;
    c->bytes += held;
    *kept = true;
    return 0;
}

void *wdev_cache_get(struct wdev_cache *c, uint64_t index, size_t rows)
{
    if (!(index < c->cap && c->b[index].p && c->b[index].rows == rows))
        return NULL;
    if (c->got[1] != index) {
        c->got[0] = c->got[1];
        c->got[1] = index;
    }
    return c->b[index].p;
}

size_t wdev_cache_count(const struct wdev_cache *c, size_t *bytes)
{
    *bytes = c->bytes;
    return c->count;
}

void wdev_cache_free(struct wdev_cache *c)
{
    if (!c)
        return;
    c->dev->be->set_reclaim(c->dev->be, NULL, NULL);
    for (size_t i = 0; i < c->cap; i++)
        if (c->b[i].p)
            c->dev->be->free(c->dev->be, c->b[i].p);   /* reused only by work queued later on the compute stream */
    free(c->b);
    free(c);
}
