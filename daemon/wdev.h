/* wdev.h — a GPU worker's device (wdev_*): its CUDA backend, made on the worker's thread, and batch uploads to it. */
#ifndef TRAIND_DAEMON_WDEV_H
#define TRAIND_DAEMON_WDEV_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "err.h"
#include "prefetch.h"

/*
 * With main.c's device discovery, the only daemon code that calls gpu/ (built with
 * TRAIND_HAVE_CUDA); without CUDA wdev_open fails with ERR_DEVICE and nothing else is
 * ever called.
 */
struct wdev;

/*
 * Makes cuda:index current in the calling thread and creates its backend there
 * (be_cuda_create): call from the worker thread that will use it, once, and keep it.
 */
int wdev_open(int index, struct wdev **out, struct err *e);
void wdev_close(struct wdev *d);   /* NULL is fine */

const struct backend *wdev_backend(const struct wdev *d);

/* After a job: the cached device memory goes back to CUDA (torch.cuda.empty_cache). */
void wdev_job_end(struct wdev *d);

/* Page-locked slots for the prefetch ring, so uploads from them run as DMA. Lives as long as d. */
const struct prefetch_allocator *wdev_ring_allocator(struct wdev *d);

/*
 * One device buffer a job's batches are copied into, one after the other: wdev_upload
 * queues the copy on the copy stream after every kernel already queued (which may still
 * read the previous batch), waits until it has finished, so src (a ring slot) can be
 * released at once, and gives the device address; kernels queued later see the data.
 */
struct wdev_upload;
int wdev_upload_new(struct wdev *d, size_t bytes, struct wdev_upload **out, struct err *e);
int wdev_upload(struct wdev_upload *u, const void *src, size_t bytes, void **dst, struct err *e);
void wdev_upload_free(struct wdev_upload *u);   /* NULL is fine */

#endif
