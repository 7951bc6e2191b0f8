/* wdev.c — a GPU worker's backend, pinned ring slots and batch uploads over gpu/ (stubs without CUDA). */
#include "wdev.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "traind_config.h"

#if TRAIND_HAVE_CUDA

#include "alloc.h"
#include "be_cuda.h"

struct wdev {
    struct backend *be;
    int index;                        /* N of cuda:N: pinned slots are allocated with it current */
    struct gpu_host_allocator pinned;
    struct prefetch_allocator ring;   /* adapts pinned to storage's allocator shape */
};

struct wdev_upload {
    struct wdev *dev;
    void *buf[2];                     /* device memory from be->alloc, a full batch each */
    size_t bytes;
    struct gpu_event *copied[2];      /* after the latest copy into buf[i] */
    struct gpu_event *read[2];        /* after the latest step that read buf[i] */
    bool wait_all[2];                 /* buf[i]'s latest readers are not in read[i] (an evaluation) */
    int cur;                          /* the buffer the latest finish gave */
    int pending;                      /* the buffer an unfinished start copies into; -1 none */
};

/* storage's allocator has no struct err: the reason goes to the log, NULL to the ring. */
static void *ring_alloc(void *ctx, size_t bytes)
{
    struct wdev *d = ctx;
    struct err e = {0};
    void *p = d->pinned.alloc(d->pinned.ctx, bytes, &e);
    if (!p)
        log_warn("%s: pinned ring slot of %zu bytes: %s", d->be->name, bytes, e.msg);
    return p;
}

static void ring_free(void *ctx, void *p)
{
    struct wdev *d = ctx;
    d->pinned.free(d->pinned.ctx, p);
}

int wdev_open(int index, struct wdev **out, struct err *e)
{
    struct wdev *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(e, ERR_NOMEM, "cuda:%d: out of memory", index);
    if (be_cuda_create(index, &d->be, e)) {
        free(d);
        return e->code;
    }
    d->index = index;
    d->pinned = gpu_pinned_allocator_on(&d->index);
    d->ring = (struct prefetch_allocator){.alloc = ring_alloc, .free = ring_free, .ctx = d};
    *out = d;
    return 0;
}

void wdev_close(struct wdev *d)
{
    if (!d)
        return;
    be_cuda_destroy(d->be);
    free(d);
}

const struct backend *wdev_backend(const struct wdev *d)
{
    return d->be;
}

int wdev_job_end(struct wdev *d, struct err *e)
{
    struct err first = {0};
    /* An error CUDA clears (gpu_cuda_fail) does not come back; a sticky one comes back on every call. */
    if (be_cuda_synchronize(d->be, &first) && be_cuda_synchronize(d->be, e))
        return err_set(e, ERR_DEVICE, "%s: the GPU's CUDA context is lost (%s): traind must restart to train on it",
                       d->be->name, first.msg);
    if (first.code)
        log_warn("%s: after the job: %s", d->be->name, first.msg);
    struct err ec = {0};
    if (be_cuda_empty_cache(d->be, &ec))
        log_warn("%s: after the job: %s", d->be->name, ec.msg);
    return ERR_OK;
}

void wdev_memory(const struct wdev *d, uint64_t *allocated, uint64_t *reserved)
{
    struct gpu_mem_stats st;
    be_cuda_memory_stats(d->be, &st);
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
    /* The blocks may come from the cache, last read by kernels still queued: the first copy into each
       waits for everything queued before it, as after an evaluation. */
    u->wait_all[0] = u->wait_all[1] = true;
    for (int i = 0; i < 2; i++) {
        if (!(u->buf[i] = d->be->alloc(d->be, bytes, e)) || be_cuda_event_new(d->be, &u->copied[i], e) ||
            be_cuda_event_new(d->be, &u->read[i], e)) {
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
static int host_wait(struct gpu_event *ev, struct err *e)
{
    for (;;) {
        bool done = false;
        if (be_cuda_event_query(ev, &done, e))
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
    /* reusable NULL: after an evaluation, wait for every kernel queued so far (they may read buf[i]). */
    if (be_cuda_upload_start(u->dev->be, u->buf[i], src, bytes, u->wait_all[i] ? NULL : u->read[i],
                             u->copied[i], e))
        return e->code;
    u->wait_all[i] = false;
    return 0;
}

int wdev_upload_step_done(struct wdev_upload *u, const void *dst, struct err *e)
{
    for (int i = 0; i < 2; i++)
        if (u->buf[i] == dst)
            return be_cuda_compute_record(u->dev->be, u->read[i], e);
    return err_set(e, ERR_INTERNAL, "a step done on a buffer that is not a batch buffer");
}

int wdev_upload_finish(struct wdev_upload *u, void **dst, struct err *e)
{
    int i = u->pending;
    if (i < 0)
        return err_set(e, ERR_INTERNAL, "an upload finished that never started");
    if (host_wait(u->copied[i], e) || be_cuda_compute_wait(u->dev->be, u->copied[i], e))
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
    if (be_cuda_synchronize(u->dev->be, &e))
        log_warn("%s: waiting for an abandoned batch copy: %s", u->dev->be->name, e.msg);
    u->pending = -1;
}

int wdev_upload(struct wdev_upload *u, const void *src, size_t bytes, void **dst, struct err *e)
{
    if (u->pending >= 0)
        return err_set(e, ERR_INTERNAL, "an upload while a started one is unfinished");
    if (bytes > u->bytes)
        return err_set(e, ERR_INTERNAL, "a batch of %zu bytes in a buffer of %zu", bytes, u->bytes);
    int i = u->cur ^ 1;
    /* reusable NULL: the copy waits for every kernel queued so far (they may read buf[i]). */
    if (be_cuda_upload_async(u->dev->be, u->buf[i], src, bytes, NULL, u->copied[i], e) ||
        host_wait(u->copied[i], e))
        return e->code;
    u->wait_all[i] = true;
    *dst = u->buf[i];
    return 0;
}

void wdev_upload_free(struct wdev_upload *u)
{
    if (!u)
        return;
    wdev_upload_abandon(u);
    for (int i = 0; i < 2; i++) {
        be_cuda_event_free(u->copied[i]);
        be_cuda_event_free(u->read[i]);
        if (u->buf[i])
            u->dev->be->free(u->dev->be, u->buf[i]);
    }
    free(u);
}

struct cached_batch {
    void *p;                          /* device memory from be_cuda_alloc_spare; NULL: not kept */
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
 * The allocator's last resort (be_cuda_set_reclaim) when a step or an evaluation runs out
 * of device memory: every kept batch goes but the two handed out last, which kernels queued
 * from now on may still read (the step's batch and the one fetched ahead); the memory is
 * freed after the kernels queued so far (cudaFree waits for them). Nothing more is kept,
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
    size_t free_bytes = 0;
    if (be_cuda_free_memory(d->be, &free_bytes, e))
        return e->code;
    struct wdev_cache *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(e, ERR_NOMEM, "%s: out of memory", d->be->name);
    c->dev = d;
    c->budget = free_bytes / 2;       /* headroom for the model, the optimizer and other jobs' needs */
    c->got[0] = c->got[1] = UINT64_MAX;
    be_cuda_set_reclaim(d->be, cache_reclaim, c);
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
    size_t held = gpu_alloc_round(bytes);   /* what the block really takes */
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
    void *p = be_cuda_alloc_spare(c->dev->be, bytes, &ae);
    if (!p) {   /* the device is fuller than when the cache was made: keep what there is */
        c->full = true;
        return 0;
    }
    if (be_cuda_copy_on_device(c->dev->be, p, dev, bytes, e)) {
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
    be_cuda_set_reclaim(c->dev->be, NULL, NULL);
    for (size_t i = 0; i < c->cap; i++)
        if (c->b[i].p)
            c->dev->be->free(c->dev->be, c->b[i].p);   /* reused only by work queued later on the compute stream */
    free(c->b);
    free(c);
}

#else /* !TRAIND_HAVE_CUDA: no worker ever has a device; these keep the callers free of #if. */

int wdev_open(int index, struct wdev **out, struct err *e)
{
    *out = NULL;
    return err_set(e, ERR_DEVICE, "cuda:%d: this traind was built without CUDA", index);
}

void wdev_close(struct wdev *d) { (void)d; }
const struct backend *wdev_backend(const struct wdev *d) { (void)d; return be_cpu(); }
int wdev_job_end(struct wdev *d, struct err *e)
{
    (void)d;
    (void)e;
    return ERR_OK;
}
void wdev_memory(const struct wdev *d, uint64_t *allocated, uint64_t *reserved)
{
    (void)d;
    *allocated = *reserved = 0;
}

const struct prefetch_allocator *wdev_ring_allocator(struct wdev *d) { (void)d; return NULL; }

int wdev_upload_new(struct wdev *d, size_t bytes, struct wdev_upload **out, struct err *e)
{
    (void)d;
    (void)bytes;
    *out = NULL;
    return err_set(e, ERR_DEVICE, "built without CUDA");
}

int wdev_upload(struct wdev_upload *u, const void *src, size_t bytes, void **dst, struct err *e)
{
    (void)u;
    (void)src;
    (void)bytes;
    *dst = NULL;
    return err_set(e, ERR_DEVICE, "built without CUDA");
}

int wdev_upload_start(struct wdev_upload *u, const void *src, size_t bytes, struct err *e)
{
    (void)u;
    (void)src;
    (void)bytes;
    return err_set(e, ERR_DEVICE, "built without CUDA");
}

int wdev_upload_step_done(struct wdev_upload *u, const void *dst, struct err *e)
{
    (void)u;
    (void)dst;
    return err_set(e, ERR_DEVICE, "built without CUDA");
}

int wdev_upload_finish(struct wdev_upload *u, void **dst, struct err *e)
{
    (void)u;
    *dst = NULL;
    return err_set(e, ERR_DEVICE, "built without CUDA");
}

void wdev_upload_abandon(struct wdev_upload *u) { (void)u; }

int wdev_cache_new(struct wdev *d, struct wdev_cache **out, struct err *e)
{
    (void)d;
    *out = NULL;
    return err_set(e, ERR_DEVICE, "built without CUDA");
}

int wdev_cache_put(struct wdev_cache *c, uint64_t index, const void *dev, size_t rows, size_t bytes,
                   bool *kept, struct err *e)
{
    (void)c;
    (void)index;
    (void)dev;
    (void)rows;
    (void)bytes;
    *kept = false;
    return err_set(e, ERR_DEVICE, "built without CUDA");
}

void *wdev_cache_get(struct wdev_cache *c, uint64_t index, size_t rows)
{
    (void)c;
    (void)index;
    (void)rows;
    return NULL;
}

size_t wdev_cache_count(const struct wdev_cache *c, size_t *bytes)
{
    (void)c;
    *bytes = 0;
    return 0;
}

void wdev_cache_free(struct wdev_cache *c) { (void)c; }
void wdev_upload_free(struct wdev_upload *u) { (void)u; }

#endif
