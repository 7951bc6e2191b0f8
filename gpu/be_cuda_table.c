/* be_cuda_table.c — the CUDA backend's memory and stream entries of core's table, and its factory: adapters over be_cuda.h. */
#include "be_cuda.h"
#include "be_cuda_impl.h"

/* core's be_event is the CUDA backend's gpu_event: only this backend makes and reads them. */
static struct gpu_event *gev(struct be_event *ev)
{
    return (struct gpu_event *)ev;
}

/* Pinned, with the backend's device current: a prefetch thread has none of its own. */
static void *cu_host_alloc(const struct backend *be, size_t bytes, struct err *e)
{
    struct gpu_host_allocator a = gpu_pinned_allocator_on(&cuda_ctx_of(be)->device);
    return a.alloc(a.ctx, bytes, e);
}

static void cu_host_free(const struct backend *be, void *p)
{
    struct gpu_host_allocator a = gpu_pinned_allocator_on(&cuda_ctx_of(be)->device);
    a.free(a.ctx, p);
}

static int cu_event_new(const struct backend *be, struct be_event **out, struct err *e)
{
    struct gpu_event *ev = NULL;
    int rc = be_cuda_event_new(be, &ev, e);
    *out = (struct be_event *)ev;
    return rc;
}

static void cu_event_free(const struct backend *be, struct be_event *ev)
{
    be_cuda_event_free(gev(ev));
}

static int cu_upload_async(const struct backend *be, void *dst, const void *src, size_t bytes,
                           struct be_event *reusable, struct be_event *copied, struct err *e)
{
    return be_cuda_upload_async(be, dst, src, bytes, gev(reusable), gev(copied), e);
}

static int cu_upload_start(const struct backend *be, void *dst, const void *src, size_t bytes,
                           struct be_event *reusable, struct be_event *copied, struct err *e)
{
    return be_cuda_upload_start(be, dst, src, bytes, gev(reusable), gev(copied), e);
}

static int cu_compute_wait(const struct backend *be, struct be_event *ev, struct err *e)
{
    return be_cuda_compute_wait(be, gev(ev), e);
}

static int cu_compute_record(const struct backend *be, struct be_event *ev, struct err *e)
{
    return be_cuda_compute_record(be, gev(ev), e);
}

static int cu_event_query(const struct backend *be, struct be_event *ev, bool *done, struct err *e)
{
    return be_cuda_event_query(gev(ev), done, e);
}

static void cu_memory_stats(const struct backend *be, struct be_mem_stats *out)
{
    struct gpu_mem_stats st;
    be_cuda_memory_stats(be, &st);
    *out = (struct be_mem_stats){.allocated = st.allocated, .reserved = st.reserved};
}

static size_t cu_alloc_size(const struct backend *be, size_t bytes)
{
    return gpu_alloc_round(bytes);
}

static int cu_side_wait(const struct backend *be, struct be_event *ev, struct err *e)
{
    return be_cuda_side_wait(be, gev(ev), e);
}

static int cu_side_record(const struct backend *be, struct be_event *ev, struct err *e)
{
    return be_cuda_side_record(be, gev(ev), e);
}

/* The device made current here, as every entry does, and the compute stream. */
static int cu_native_stream(const struct backend *be, void **stream, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    *stream = NULL;
    if (cuda_enter(c, e))
        return e->code;
    *stream = (void *)c->compute;
    return 0;
}

/* As cu_native_stream, the side stream. */
static int cu_side_stream(const struct backend *be, void **stream, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    *stream = NULL;
    if (cuda_enter(c, e))
        return e->code;
    *stream = (void *)c->side;
    return 0;
}

void cuda_table_fill(struct backend *be)
{
    be->host_alloc = cu_host_alloc;
    be->host_free = cu_host_free;
    be->event_new = cu_event_new;
    be->event_free = cu_event_free;
    be->upload_async = cu_upload_async;
    be->upload_start = cu_upload_start;
    be->compute_wait = cu_compute_wait;
    be->compute_record = cu_compute_record;
    be->event_query = cu_event_query;
    be->synchronize = be_cuda_synchronize;
    be->copy_on_device = be_cuda_copy_on_device;
    be->memory_stats = cu_memory_stats;
    be->empty_cache = be_cuda_empty_cache;
    be->free_memory = be_cuda_free_memory;
    be->alloc_spare = be_cuda_alloc_spare;
    be->alloc_size = cu_alloc_size;
    be->set_reclaim = be_cuda_set_reclaim;
    be->native_stream = cu_native_stream;
    be->side_stream = cu_side_stream;
    be->side_wait = cu_side_wait;
    be->side_record = cu_side_record;
}

static int factory_create(int index, const struct backend **out, struct err *e)
{
    struct backend *be = NULL;
    int rc = be_cuda_create(index, &be, e);
    *out = be;
    return rc;
}

/* be was made by factory_create, so it is this backend's to free. */
static void factory_destroy(const struct backend *be)
{
    be_cuda_destroy((struct backend *)be);
}

static const struct backend_factory cuda_factory = {
    .kind = "cuda",
    .create = factory_create,
    .destroy = factory_destroy,
};

const struct backend_factory *be_cuda_factory(void)
{
    return &cuda_factory;
}
