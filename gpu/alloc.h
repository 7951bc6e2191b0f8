/* alloc.h — a caching device allocator (one per backend) and a pinned host allocator. */
#ifndef TRAIND_GPU_ALLOC_H
#define TRAIND_GPU_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/*
 * Device memory in size classes (512 B steps below 1 MiB, 2 MiB steps above),
 * kept when freed and handed out again for the same class, so a training step
 * after the first calls cudaMalloc never (PyTorch's caching allocator, without
 * block splitting). Freed blocks are reused in stream order: the backend runs
 * every kernel on one compute stream, so a block freed by a queued kernel is
 * only written by work queued after it. Thread-safe.
 */
struct gpu_alloc;

struct gpu_mem_stats {
    size_t allocated;       /* bytes in blocks handed out (PyTorch's memory_allocated) */
    size_t reserved;        /* bytes obtained from cudaMalloc (memory_reserved) */
    size_t peak_allocated;
    uint64_t n_device_mallocs;   /* cudaMalloc calls so far (reuse shows as no growth) */
    uint64_t n_cache_hits;
};

int gpu_alloc_create(int device, struct gpu_alloc **out, struct err *e);
/* Returns every block to CUDA. Blocks still handed out are freed too. */
void gpu_alloc_destroy(struct gpu_alloc *a);

/*
 * A block of at least bytes. On cudaErrorMemoryAllocation the cache is emptied and
 * the cudaMalloc retried once; then ERR_OUT_OF_MEMORY naming the bytes asked and free.
 */
void *gpu_alloc_get(struct gpu_alloc *a, size_t bytes, struct err *e);
/*
 * The same, but only from memory nobody holds: a new cudaMalloc block, never one of the
 * cache's free blocks, and on out-of-memory the cache is left as it is (its free blocks
 * are the step's temporaries, asked for again next step): ERR_OUT_OF_MEMORY. For optional
 * holdings such as a device copy of the data. Returned with gpu_alloc_put as any block.
 */
void *gpu_alloc_spare(struct gpu_alloc *a, size_t bytes, struct err *e);
void gpu_alloc_put(struct gpu_alloc *a, void *p);   /* NULL is fine */

/*
 * The last resort of gpu_alloc_get when emptying the cache was not enough: reclaim(ctx)
 * gives back optional holdings (gpu_alloc_put of blocks from gpu_alloc_spare, such as a
 * device copy of the data) and says whether it gave back any; they are freed and the
 * cudaMalloc is tried once more. It runs on the thread that asked, without the allocator's
 * lock, and may only put blocks. NULL removes it.
 */
void gpu_alloc_set_reclaim(struct gpu_alloc *a, bool (*reclaim)(void *ctx), void *ctx);

/* The counters as of the last change; never waits for an allocation or a free under way. */
void gpu_alloc_stats(struct gpu_alloc *a, struct gpu_mem_stats *out);
/* cudaFree of every cached (not handed out) block: torch.cuda.empty_cache. */
int gpu_alloc_empty_cache(struct gpu_alloc *a, struct err *e);

/* The size class a request of bytes is served from; 0 when bytes is too large to round. */
size_t gpu_alloc_round(size_t bytes);

/*
 * The injected-allocator shape storage's prefetch ring takes, so it can put batches
 * in pinned memory without knowing CUDA.
 */
struct gpu_host_allocator {
    void *(*alloc)(void *ctx, size_t bytes, struct err *e);
    void (*free)(void *ctx, void *p);
    void *ctx;
};

/* Page-locked host memory (cudaHostAlloc, portable to every device); ctx is unused. */
struct gpu_host_allocator gpu_pinned_allocator(void);
/*
 * The same, allocating with *device current in the calling thread (a prefetch thread has
 * none, and CUDA would use device 0, which --gpus may leave to others). device must
 * outlive the allocator.
 */
struct gpu_host_allocator gpu_pinned_allocator_on(const int *device);

#endif
