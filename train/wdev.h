/* wdev.h — a worker's device (wdev_*): its backend, made on the worker's thread, and batch uploads to it. */
#ifndef TRAIND_TRAIN_WDEV_H
#define TRAIND_TRAIN_WDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "err.h"
#include "prefetch.h"

/*
 * Written against core's backend table only (its memory and stream entries): which backend
 * it drives is the factory's business.
 */
struct wdev;

/*
 * Creates device index's backend with f (f->create makes the device current in the calling
 * thread): call from the worker thread that will use it, once, and keep it. f NULL (a build
 * without a GPU backend): ERR_DEVICE.
 */
int wdev_open(const struct backend_factory *f, int index, struct wdev **out, struct err *e);
void wdev_close(struct wdev *d);   /* NULL is fine */

const struct backend *wdev_backend(const struct wdev *d);

/*
 * After a job: the cached device memory goes back to the driver (torch.cuda.empty_cache).
 * ERR_DEVICE when the GPU's CUDA context is lost: a device fault (an illegal address,
 * a kernel trap, an uncorrectable ECC error, a GPU fallen off the bus) is sticky, every
 * later call in this process fails with it, and only a new process gets a new context.
 */
int wdev_job_end(struct wdev *d, struct err *e);

/* The caching allocator's bytes handed out and bytes held (memory_allocated / memory_reserved); any thread. */
void wdev_memory(const struct wdev *d, uint64_t *allocated, uint64_t *reserved);

/* Slots for the prefetch ring in the backend's host memory (page-locked with CUDA, so uploads
 * from them run as DMA). Lives as long as d. */
const struct prefetch_allocator *wdev_ring_allocator(struct wdev *d);

/*
 * Two device buffers a job's batches are copied into, so the copy of batch k+1 runs on
 * the copy stream while step k's kernels run on the compute stream.
 * The training loop's protocol, one batch after the other:
 *
 *   wdev_upload_start(u, slot k+1)   queue its copy into the buffer step k does not read,
 *                                    after that buffer's last reader (step k-1) finished on
 *                                    the device; returns at once
 *   ... queue step k on *dst of the previous finish ...
 *   wdev_upload_step_done(u, dst)    step k's kernels are the last readers of dst
 *   wdev_upload_finish(u, &dst)      the host waits for the copy (the ring slot may go back
 *                                    now), kernels queued later wait for it; dst is batch k+1
 *
 * The first batch is a start then a finish with no step between. Every start is followed
 * by its finish (or wdev_upload_abandon) before the next start, a wdev_upload, or freeing
 * the ring slot it reads.
 *
 * wdev_upload (evaluation between steps) copies into the buffer that does not hold the
 * batch the last finish gave, waiting for every kernel queued so far and then for the copy
 * itself, so src can be released at once and the next step's batch is left alone; kernels
 * queued later see the data. Not while a start is unfinished (ERR_INTERNAL). The next start
 * into that buffer waits for every kernel queued before it (the evaluation's readers).
 */
struct wdev_upload;
int wdev_upload_new(struct wdev *d, size_t bytes, struct wdev_upload **out, struct err *e);
int wdev_upload_start(struct wdev_upload *u, const void *src, size_t bytes, struct err *e);
int wdev_upload_step_done(struct wdev_upload *u, const void *dst, struct err *e);
int wdev_upload_finish(struct wdev_upload *u, void **dst, struct err *e);
/*
 * On a backend whose memory is the host's (backend.host_memory: the CPU) nothing is copied:
 * finish and wdev_upload give src itself, so the caller keeps src (its ring slot) until the
 * step or evaluation that reads it is done, instead of handing it back after finish.
 */
bool wdev_upload_in_place(const struct wdev_upload *u);
/* After a failure: waits until an unfinished start's copy no longer reads its source. */
void wdev_upload_abandon(struct wdev_upload *u);
int wdev_upload(struct wdev_upload *u, const void *src, size_t bytes, void **dst, struct err *e);
void wdev_upload_free(struct wdev_upload *u);   /* NULL is fine; abandons an unfinished start */

/*
 * A training set's batches kept on the device after the epoch that first copied them (data
 * that fits in device memory stays there), for data whose batch i is the same rows every
 * epoch (no shuffling: the caller checks). It holds at most half the device memory free when
 * it is made. On a backend whose memory is the host's there is nothing to keep: *out is NULL.
 *   wdev_cache_put: keeps a copy of the device batch at dev (what wdev_upload_finish gave) as
 *     batch index, on the compute stream after the kernels queued so far, so the caller puts
 *     it before the step that reads dev and before wdev_upload_step_done. Past the budget, or
 *     when device memory runs out, it keeps nothing more (and says so in *kept); not an error.
 *   wdev_cache_get: the kept copy of batch index if it has that many rows, else NULL; kernels
 *     read it like a batch buffer, and no wdev_upload_step_done follows them.
 * When an allocation on the device fails even after the allocator emptied its cache, the
 * kept batches are dropped, but for the last two wdev_cache_get handed out (kernels queued
 * later may read them: only those two may be), and the allocation is tried again.
 */
struct wdev_cache;
int wdev_cache_new(struct wdev *d, struct wdev_cache **out, struct err *e);
int wdev_cache_put(struct wdev_cache *c, uint64_t index, const void *dev, size_t rows, size_t bytes,
                   bool *kept, struct err *e);
void *wdev_cache_get(struct wdev_cache *c, uint64_t index, size_t rows);
/* Batches and bytes kept. */
size_t wdev_cache_count(const struct wdev_cache *c, size_t *bytes);
void wdev_cache_free(struct wdev_cache *c);   /* NULL is fine */

#endif
