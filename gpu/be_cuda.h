/* be_cuda.h — the CUDA backend: core's backend table on one GPU, its streams, events and memory stats (the table's entries call these). */
#ifndef TRAIND_GPU_BE_CUDA_H
#define TRAIND_GPU_BE_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "backend.h"
#include "err.h"

/*
 * One backend per device per worker thread: be_cuda_create makes
 * `device` current in the calling thread and gives the backend a non-blocking
 * compute stream (every kernel, memset and to_host/from_host copy), a copy stream
 * (batch uploads), a cuBLAS handle bound to the compute stream and its own caching
 * allocator. The name is "cuda:N". Kernel entries are asynchronous; to_host,
 * from_host and sumsq wait for the compute stream. Entries called from another
 * thread make the device current there first.
 */
int be_cuda_create(int device, struct backend **out, struct err *e);
/* Waits for queued work and frees everything the backend owns. NULL is fine. */
void be_cuda_destroy(struct backend *be);

/* be_cuda_create and be_cuda_destroy as core's backend_factory, for the daemon's GPU workers. */
const struct backend_factory *be_cuda_factory(void);

/* Is be a CUDA backend (made by be_cuda_create)? */
bool be_cuda_is(const struct backend *be);
int be_cuda_device(const struct backend *be);

/* Waits until every kernel and copy queued on be has finished. */
int be_cuda_synchronize(const struct backend *be, struct err *e);

/* torch.cuda.memory_allocated / memory_reserved / empty_cache for this backend. */
void be_cuda_memory_stats(const struct backend *be, struct gpu_mem_stats *out);
int be_cuda_empty_cache(const struct backend *be, struct err *e);

/* be->alloc without taking memory from the backend's cache of free blocks (gpu_alloc_spare):
 * NULL with ERR_OUT_OF_MEMORY when the device has no such memory. Freed with be->free. */
void *be_cuda_alloc_spare(const struct backend *be, size_t bytes, struct err *e);
/* The allocator's last resort on out-of-memory (gpu_alloc_set_reclaim): reclaim gives back
 * blocks of be_cuda_alloc_spare with be->free and says whether it gave any. NULL: none. */
void be_cuda_set_reclaim(const struct backend *be, bool (*reclaim)(void *ctx), void *ctx);

/* Device memory not yet allocated by anyone (cudaMemGetInfo): this backend's cache counts as used. */
int be_cuda_free_memory(const struct backend *be, size_t *free_bytes, struct err *e);

/* Copies bytes between two device buffers on the compute stream, after every kernel queued so far; returns at once. */
int be_cuda_copy_on_device(const struct backend *be, void *dst, const void *src, size_t bytes,
                           struct err *e);

/*
 * Device-side init: contiguous t = uniform [lo, hi) from Philox4x32-10, element i a
 * function of (seed, offset + i) only (gpu/philox.h has the host copy of the stream).
 */
int be_cuda_uniform(const struct backend *be, struct tensor *t, uint64_t seed, uint64_t offset,
                    double lo, double hi, struct err *e);

/*
 * Ordering between the backend's two streams. Everything but uploads runs on the compute
 * stream, in the order queued: kernels, cuBLAS, memsets (be->memset0, tensor_new's
 * zero-fill), to_host, from_host, be_cuda_copy_on_device. The copy stream runs uploads
 * only. An event marks a point in one stream; the other stream, or the host, waits for it.
 *
 *   compute -> copy: an upload's copy starts after every compute-stream operation queued
 *     before the call that reads or writes dst. With `reusable` last recorded by
 *     be_cuda_compute_record, the copy waits for that record only: the caller records it
 *     after the last such operation (dst's initialisation, its last readers, the kernels
 *     that used the block before it went back to the allocator). With reusable NULL, never
 *     recorded, or last recorded as another upload's `copied`, the copy waits for an event
 *     the backend records on the compute stream at the call: everything queued so far.
 *   copy -> compute: be_cuda_upload_async makes every compute-stream operation queued after
 *     it wait for the copy. After be_cuda_upload_start nothing waits until the caller's
 *     be_cuda_compute_wait(copied); until then dst belongs to the copy: no kernel, memset,
 *     to_host, from_host, be_cuda_copy_on_device or be->free of it.
 *   copy -> host: the copy reads src, pinned host memory (gpu_pinned_allocator), until
 *     `copied` completes; the host writes or frees src only after be_cuda_event_query said
 *     done, or after be_cuda_synchronize.
 *   device blocks: be->free gives a block back to the allocator at once; it is handed out
 *     again in compute-stream order, so compute-stream work on the new owner follows the
 *     old owner's. An upload into it follows the old owner's work only through the
 *     compute -> copy wait above (a fresh event is never recorded, so it waits for all).
 *   downloads and copies on the device: to_host and be_cuda_copy_on_device run on the
 *     compute stream and see an upload only once the compute stream waits for it (always
 *     after be_cuda_upload_async; after be_cuda_compute_wait(copied) for a started one).
 *
 *   be_cuda_upload_async: the copy of bytes from src to dst on the copy stream; returns at
 *     once. `copied` (may be NULL) is recorded after it.
 *   be_cuda_upload_start: the same copy, but compute-stream work queued later does not wait
 *     for it, so it may run while the copy does (the next batch's copy under the current
 *     step). `copied` is required.
 *   be_cuda_compute_wait: compute-stream operations queued after this call start after ev.
 *   be_cuda_compute_record: records ev after every compute-stream operation queued so far.
 */
struct gpu_event;
int be_cuda_event_new(const struct backend *be, struct gpu_event **out, struct err *e);
void be_cuda_event_free(struct gpu_event *ev);
int be_cuda_upload_async(const struct backend *be, void *dst, const void *src, size_t bytes,
                         struct gpu_event *reusable, struct gpu_event *copied, struct err *e);
int be_cuda_upload_start(const struct backend *be, void *dst, const void *src, size_t bytes,
                         struct gpu_event *reusable, struct gpu_event *copied, struct err *e);
int be_cuda_compute_wait(const struct backend *be, struct gpu_event *ev, struct err *e);
int be_cuda_compute_record(const struct backend *be, struct gpu_event *ev, struct err *e);
/* The side stream's (backend.h, side_stream): it waits for ev; ev recorded after its work. */
int be_cuda_side_wait(const struct backend *be, struct gpu_event *ev, struct err *e);
int be_cuda_side_record(const struct backend *be, struct gpu_event *ev, struct err *e);
/* *done: has everything before ev finished? (Never blocks.) */
int be_cuda_event_query(struct gpu_event *ev, bool *done, struct err *e);

#endif
