/* backend.h — the table of functions a device implements; autograd, nn and optim call only this. */
#ifndef TRAIND_CORE_BACKEND_H
#define TRAIND_CORE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend_ops.h"
#include "tensor.h"

/* A point in one of a backend's streams (see the ordering below); the backend defines it. */
struct be_event;

/* torch.cuda.memory_allocated / memory_reserved: bytes in blocks handed out, bytes held. */
struct be_mem_stats {
    uint64_t allocated, reserved;
};

/*
 * One struct of function pointers per device (ggml's backend table). The CPU
 * backend lives in core/ (be_cpu.c); the CUDA backend in gpu/ fills the same
 * table. Kernel entries take tensors whose dtype, shapes and backend the caller
 * (ops.c) has already checked. Every entry is filled: a backend with nothing to
 * do for one (the CPU has no streams) does it trivially.
 */
struct backend {
    const char *name;                       /* "cpu", "cuda:0" */
    void *ctx;                              /* the backend's own state */
    /* Device memory is host memory (the CPU): a batch in a ring slot is read where it lies,
     * so a worker copies nothing to the device and keeps no device copy of the data. */
    bool host_memory;

    void *(*alloc)(const struct backend *be, size_t bytes, struct err *e);
    void (*free)(const struct backend *be, void *p);
    int (*memset0)(const struct backend *be, void *p, size_t bytes, struct err *e);
    /* Copies between this device and host memory. */
    int (*to_host)(const struct backend *be, void *dst, const void *src, size_t bytes, struct err *e);
    int (*from_host)(const struct backend *be, void *dst, const void *src, size_t bytes, struct err *e);

    /* The op kernel entries (backend_ops.h). */
    const struct be_kernels *k;

    /*
     * ---- Memory and streams: what a worker needs to feed the device. ----
     * A backend runs its work on two streams: compute (kernels, memsets, to_host,
     * from_host, copy_on_device, in the order queued) and copy (uploads only). An event
     * marks a point in one stream; the other stream, or the host, waits for it.
     *
     *   compute -> copy: an upload's copy starts after every compute-stream operation
     *     queued before the call that reads or writes dst. With `reusable` last recorded by
     *     compute_record, the copy waits for that record only: the caller records it after
     *     the last such operation. With reusable NULL, never recorded, or last recorded as
     *     another upload's `copied`, the copy waits for everything queued so far.
     *   copy -> compute: upload_async makes every compute-stream operation queued after it
     *     wait for the copy. After upload_start nothing waits until the caller's
     *     compute_wait(copied); until then dst belongs to the copy: no kernel, memset,
     *     to_host, from_host, copy_on_device or free of it.
     *   copy -> host: the copy reads src (host_alloc memory) until `copied` completes; the
     *     host writes or frees src only after event_query said done, or after synchronize.
     *   device blocks: free gives a block back at once; it is handed out again in
     *     compute-stream order. An upload into it follows the old owner's work only
     *     through the compute -> copy wait above.
     *
     * The CPU backend has one stream, the caller's: every copy is done when its call
     * returns and every event is always done.
     */

    /* Host memory the device copies from fastest (page-locked with CUDA): the prefetch
     * ring's slots. Any thread. host_free(NULL) is fine. */
    void *(*host_alloc)(const struct backend *be, size_t bytes, struct err *e);
    void (*host_free)(const struct backend *be, void *p);

    int (*event_new)(const struct backend *be, struct be_event **out, struct err *e);
    void (*event_free)(const struct backend *be, struct be_event *ev);   /* NULL is fine */
    /* The copy of bytes from host src to device dst on the copy stream; returns at once.
     * `copied` (may be NULL) is recorded after it. */
    int (*upload_async)(const struct backend *be, void *dst, const void *src, size_t bytes,
                        struct be_event *reusable, struct be_event *copied, struct err *e);
    /* The same copy, but compute-stream work queued later does not wait for it (the next
     * batch's copy under the current step). `copied` is required. */
    int (*upload_start)(const struct backend *be, void *dst, const void *src, size_t bytes,
                        struct be_event *reusable, struct be_event *copied, struct err *e);
    /* Compute-stream operations queued after this call start after ev. */
    int (*compute_wait)(const struct backend *be, struct be_event *ev, struct err *e);
    /* Records ev after every compute-stream operation queued so far. */
    int (*compute_record)(const struct backend *be, struct be_event *ev, struct err *e);
    /* *done: has everything before ev finished? Never blocks. */
    int (*event_query)(const struct backend *be, struct be_event *ev, bool *done, struct err *e);
    /* Waits until every kernel and copy queued on be has finished. */
    int (*synchronize)(const struct backend *be, struct err *e);

    /* Copies bytes between two device buffers on the compute stream, after every kernel
     * queued so far; returns at once. */
    int (*copy_on_device)(const struct backend *be, void *dst, const void *src, size_t bytes,
                          struct err *e);

    /* Memory stats (any thread), and the cache of free blocks handed back (empty_cache). */
    void (*memory_stats)(const struct backend *be, struct be_mem_stats *out);
    int (*empty_cache)(const struct backend *be, struct err *e);
    /* Device memory nobody holds yet (this backend's cache counts as held): what a device
     * copy of the data may use. 0 on the CPU, where the data already is. */
    int (*free_memory)(const struct backend *be, size_t *free_bytes, struct err *e);
    /* alloc without taking the backend's cached free blocks (the step's temporaries): NULL
     * with ERR_OUT_OF_MEMORY when there is no such memory. Freed with free. For optional
     * holdings such as a device copy of the data. */
    void *(*alloc_spare)(const struct backend *be, size_t bytes, struct err *e);
    /* The bytes a block of bytes really takes (its size class); 0 when too large. */
    size_t (*alloc_size)(const struct backend *be, size_t bytes);
    /* The allocator's last resort on out-of-memory: reclaim gives back blocks of
     * alloc_spare with free and says whether it gave any; the allocation is then tried
     * again. It runs on the thread that asked. NULL removes it. */
    void (*set_reclaim)(const struct backend *be, bool (*reclaim)(void *ctx), void *ctx);

    /*
     * For a collective library that queues its own kernels on this device (comm/'s NCCL
     * all-reduce): makes the device the calling thread's current one and gives the compute
     * stream as that library's handle (*stream: a cudaStream_t with CUDA). Work it queues
     * there is ordered with the backend's own as a kernel is, and compute_record and
     * event_query see it. The CPU has no such stream: *stream NULL.
     */
    int (*native_stream)(const struct backend *be, void **stream, struct err *e);

    /*
     * A third stream, the side stream, for that library's work that may run beside the
     * compute stream's (a gradient bucket's all-reduce while backward computes earlier
     * layers). side_stream makes the device current and gives it as native_stream gives the
     * compute stream; nothing of the backend's own runs on it. side_wait: side-stream work
     * queued after this call starts after ev (recorded by compute_record). side_record:
     * records ev after everything queued on the side stream so far; compute_wait(ev) then
     * orders the compute stream after it, and event_query sees it. The CPU has no side
     * stream: *stream NULL, and both event entries do nothing (its events are always done).
     */
    int (*side_stream)(const struct backend *be, void **stream, struct err *e);
    int (*side_wait)(const struct backend *be, struct be_event *ev, struct err *e);
    int (*side_record)(const struct backend *be, struct be_event *ev, struct err *e);
};

/*
 * Makes the backends of one kind of device ("cuda"), handed to the daemon by whoever links
 * that backend in, so nothing between them names it. create makes device index's backend in
 * the calling thread, the one that will use it; destroy waits for its work and frees it
 * (NULL is fine).
 */
struct backend_factory {
    const char *kind;
    int (*create)(int index, const struct backend **out, struct err *e);
    void (*destroy)(const struct backend *be);
};

const struct backend *be_cpu(void);
/* be_cpu() as a factory (kind "cpu", index 0 only), so a CPU worker drives its device as a GPU worker does. */
const struct backend_factory *be_cpu_factory(void);

#endif
