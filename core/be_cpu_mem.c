/* be_cpu_mem.c — the CPU backend's memory and stream entries: host memory, one stream (the caller's), events always done. */
#include "be_cpu_impl.h"

#include <stdlib.h>
#include <string.h>

/*
 * Host memory is the device's, so every copy is done when its call returns, there is no
 * second stream to order, and an event marks nothing: the CPU has no device-side queue.
 */
struct be_event {
    char unused;
};

void *be_cpu_host_alloc(const struct backend *be, size_t bytes, struct err *e)
{
    return be->alloc(be, bytes, e);
}

void be_cpu_host_free(const struct backend *be, void *p)
{
    be->free(be, p);
}

int be_cpu_event_new(const struct backend *be, struct be_event **out, struct err *e)
{
    if (!(*out = calloc(1, sizeof **out)))
        return err_set(e, ERR_NOMEM, "%s: out of memory for an event", be->name);
    return 0;
}

void be_cpu_event_free(const struct backend *be, struct be_event *ev)
{
    free(ev);
}

int be_cpu_upload(const struct backend *be, void *dst, const void *src, size_t bytes,
                  struct be_event *reusable, struct be_event *copied, struct err *e)
{
    if (bytes)
        memmove(dst, src, bytes);
    return 0;
}

int be_cpu_event_op(const struct backend *be, struct be_event *ev, struct err *e)
{
    return 0;
}

int be_cpu_event_query(const struct backend *be, struct be_event *ev, bool *done, struct err *e)
{
    *done = true;
    return 0;
}

int be_cpu_synchronize(const struct backend *be, struct err *e)
{
    return 0;
}

int be_cpu_copy_on_device(const struct backend *be, void *dst, const void *src, size_t bytes,
                          struct err *e)
{
    if (bytes)
        memmove(dst, src, bytes);
    return 0;
}

/* Host memory is not counted: the process's own figures say it. */
void be_cpu_memory_stats(const struct backend *be, struct be_mem_stats *out)
{
    *out = (struct be_mem_stats){0};
}

/* Nothing to keep a second copy of the data in: it is in host memory already. */
int be_cpu_free_memory(const struct backend *be, size_t *free_bytes, struct err *e)
{
    *free_bytes = 0;
    return 0;
}

void *be_cpu_alloc_spare(const struct backend *be, size_t bytes, struct err *e)
{
    return be->alloc(be, bytes, e);
}

size_t be_cpu_alloc_size(const struct backend *be, size_t bytes)
{
    return bytes > SIZE_MAX - 63 ? 0 : (bytes + 63) / 64 * 64;
}

void be_cpu_set_reclaim(const struct backend *be, bool (*reclaim)(void *ctx), void *ctx)
{
}

int be_cpu_native_stream(const struct backend *be, void **stream, struct err *e)
{
    (void)be, (void)e;
    *stream = NULL;
    return 0;
}
