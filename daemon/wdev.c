/* wdev.c — a GPU worker's backend, pinned ring slots and batch uploads over gpu/ (stubs without CUDA). */
#include "wdev.h"

#include <stdlib.h>
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
    void *buf;                        /* device memory from be->alloc */
    size_t bytes;
    struct gpu_event *copied;
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

void wdev_job_end(struct wdev *d)
{
    struct err e = {0};
    if (be_cuda_synchronize(d->be, &e) || be_cuda_empty_cache(d->be, &e))
        log_warn("%s: after the job: %s", d->be->name, e.msg);
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
    if (!(u->buf = d->be->alloc(d->be, bytes, e)) || be_cuda_event_new(d->be, &u->copied, e)) {
        if (!e->code)
            err_set(e, ERR_OUT_OF_MEMORY, "%s: no device memory for a batch of %zu bytes", d->be->name, bytes);
        wdev_upload_free(u);
        return e->code;
    }
    *out = u;
    return 0;
}

int wdev_upload(struct wdev_upload *u, const void *src, size_t bytes, void **dst, struct err *e)
{
    if (bytes > u->bytes)
        return err_set(e, ERR_INTERNAL, "a batch of %zu bytes in a buffer of %zu", bytes, u->bytes);
    /* reusable NULL: the copy waits for every kernel queued so far (they may read the last batch). */
    if (be_cuda_upload_async(u->dev->be, u->buf, src, bytes, NULL, u->copied, e))
        return e->code;
    for (;;) {
        bool done = false;
        if (be_cuda_event_query(u->copied, &done, e))
            return e->code;
        if (done)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000};
        nanosleep(&ts, NULL);
    }
    *dst = u->buf;
    return 0;
}

void wdev_upload_free(struct wdev_upload *u)
{
    if (!u)
        return;
    be_cuda_event_free(u->copied);
    if (u->buf)
        u->dev->be->free(u->dev->be, u->buf);
    free(u);
}

#else /* !TRAIND_HAVE_CUDA: no worker ever has a device; these keep the callers free of #if. */

int wdev_open(int index, struct wdev **out, struct err *e)
{
    *out = NULL;
    return err_set(e, ERR_DEVICE, "cuda:%d: this traind was built without CUDA", index);
}

void wdev_close(struct wdev *d) { (void)d; }
const struct backend *wdev_backend(const struct wdev *d) { (void)d; return be_cpu(); }
void wdev_job_end(struct wdev *d) { (void)d; }
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

void wdev_upload_free(struct wdev_upload *u) { (void)u; }

#endif
