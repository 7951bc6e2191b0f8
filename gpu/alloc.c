/* alloc.c — the caching device allocator and the pinned host allocator. */
#include "alloc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "cuda_check.h"

#define SMALL_LIMIT ((size_t)1 << 20)   /* 1 MiB */
#define SMALL_STEP ((size_t)512)
#define LARGE_STEP ((size_t)2 << 20)    /* 2 MiB */

struct block {
    void *ptr;
    size_t size;        /* its size class */
    bool in_use;
};

/*
 * Blocks live in one array, searched linearly: a training step holds tens of
 * buffers (the tape's pool keeps them), so a scan is cheaper than a hash to maintain.
 * mu is held across cudaMalloc and cudaFree, which can wait for the whole device
 * (cudaFree synchronizes), so readers of the counters (GET /devices on the loop thread)
 * take only pub_mu and see the state as of the last change: they never wait for the GPU.
 */
struct gpu_alloc {
    int device;
    pthread_mutex_t mu;
    struct block *blocks;
    size_t n, cap;
    struct gpu_mem_stats st;     /* under mu */
    pthread_mutex_t pub_mu;
    struct gpu_mem_stats pub;    /* st as of the last change, under pub_mu */
    bool (*reclaim)(void *ctx);  /* under mu */
    void *reclaim_ctx;
};

/* Makes st what gpu_alloc_stats reports; the caller holds mu. */
static void publish(struct gpu_alloc *a)
{
    pthread_mutex_lock(&a->pub_mu);
    a->pub = a->st;
    pthread_mutex_unlock(&a->pub_mu);
}

size_t gpu_alloc_round(size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    size_t step = bytes < SMALL_LIMIT ? SMALL_STEP : LARGE_STEP;
    if (bytes > SIZE_MAX - step)
        return 0;
    return (bytes + step - 1) / step * step;
}

int gpu_alloc_create(int device, struct gpu_alloc **out, struct err *e)
{
    *out = NULL;
    struct gpu_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return err_set(e, ERR_NOMEM, "cuda:%d: allocator: out of host memory", device);
    int rc = pthread_mutex_init(&a->mu, NULL);
    if (!rc && (rc = pthread_mutex_init(&a->pub_mu, NULL)) != 0)
        pthread_mutex_destroy(&a->mu);
    if (rc) {
        free(a);
        return err_set(e, ERR_INTERNAL, "cuda:%d: allocator: pthread_mutex_init failed (%d)",
                       device, rc);
    }
    a->device = device;
    *out = a;
    return 0;
}

/* cudaFree needs the block's device current; the caller's device is put back after. */
static void free_blocks(struct gpu_alloc *a, bool only_cached)
{
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess ||
        (prev != a->device && cudaSetDevice(a->device) != cudaSuccess)) {
        (void)cudaGetLastError();   /* as CUDA_IGNORE: the frees below report nothing */
        prev = -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < a->n; i++) {
        struct block b = a->blocks[i];
        if (only_cached && b.in_use) {
            a->blocks[k++] = b;
            continue;
        }
        CUDA_IGNORE(cudaFree(b.ptr));   /* nothing useful to do with a failure while freeing */
        a->st.reserved -= b.size;
        if (b.in_use)
            a->st.allocated -= b.size;
    }
    a->n = k;
    publish(a);
    if (prev >= 0 && prev != a->device)
        CUDA_IGNORE(cudaSetDevice(prev));
}

void gpu_alloc_destroy(struct gpu_alloc *a)
{
    if (!a)
        return;
    free_blocks(a, false);
    free(a->blocks);
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->pub_mu);
    free(a);
}

static struct block *find_free(struct gpu_alloc *a, size_t size)
{
    for (size_t i = 0; i < a->n; i++)
        if (!a->blocks[i].in_use && a->blocks[i].size == size)
            return &a->blocks[i];
    return NULL;
}

/* The reclaim hook, called with mu held and released around it (it puts blocks). */
static bool reclaimed(struct gpu_alloc *a)
{
    bool (*reclaim)(void *) = a->reclaim;
    void *ctx = a->reclaim_ctx;
    if (!reclaim)
        return false;
    pthread_mutex_unlock(&a->mu);
    bool any = reclaim(ctx);
    pthread_mutex_lock(&a->mu);
    return any;
}

/*
 * A new block, the caller holding mu. With flush, out of memory empties the cache and tries
 * again, then asks the reclaim hook, with mu released meanwhile (the caller adds the block
 * to the array after, so whatever ran meanwhile is no matter).
 */
static int device_malloc(struct gpu_alloc *a, size_t asked, size_t size, bool flush, void **p,
                         struct err *e)
{
    cudaError_t rc = cudaMalloc(p, size);
    if (rc == cudaErrorMemoryAllocation && flush) {
        (void)cudaGetLastError();
        free_blocks(a, true);     /* give the cache back and try once more */
        rc = cudaMalloc(p, size);
        if (rc == cudaErrorMemoryAllocation && reclaimed(a)) {
            (void)cudaGetLastError();
            free_blocks(a, true);   /* what the hook gave back */
            rc = cudaMalloc(p, size);
        }
    }
    if (rc == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        CUDA_IGNORE(cudaMemGetInfo(&free_b, &total_b));
        return err_set(e, ERR_OUT_OF_MEMORY,
                       "cuda:%d: out of memory: asked %zu bytes, %zu free of %zu "
                       "(%zu allocated, %zu reserved by traind)",
                       a->device, asked, free_b, total_b, a->st.allocated, a->st.reserved);
    }
    if (rc != cudaSuccess)
        return gpu_cuda_fail(e, __FILE__, __LINE__, "cudaMalloc", rc);
    return 0;
}

static int grow(struct gpu_alloc *a, struct err *e)
{
    if (a->n < a->cap)
        return 0;
    size_t cap = a->cap ? 2 * a->cap : 64;
    struct block *nb = realloc(a->blocks, cap * sizeof *nb);
    if (!nb)
        return err_set(e, ERR_NOMEM, "cuda:%d: allocator: out of host memory", a->device);
    a->blocks = nb;
    a->cap = cap;
    return 0;
}

/* spare: neither reuses nor frees the cache's free blocks (gpu_alloc_spare). */
static void *get(struct gpu_alloc *a, size_t bytes, bool spare, struct err *e)
{
    size_t size = gpu_alloc_round(bytes);
    if (size == 0) {
        err_set(e, ERR_OUT_OF_MEMORY, "cuda:%d: out of memory: asked %zu bytes", a->device,
                bytes);
        return NULL;
    }
    void *p = NULL;
    pthread_mutex_lock(&a->mu);
    struct block *b = spare ? NULL : find_free(a, size);
    if (b) {
        b->in_use = true;
        p = b->ptr;
        a->st.n_cache_hits++;
    } else if (device_malloc(a, bytes, size, !spare, &p, e) == 0) {
        if (grow(a, e) == 0) {   /* after: another thread may have added blocks meanwhile */
            a->blocks[a->n++] = (struct block){p, size, true};
            a->st.reserved += size;
            a->st.n_device_mallocs++;
        } else {
            CUDA_IGNORE(cudaFree(p));
            p = NULL;
        }
    }
    if (p) {
        a->st.allocated += size;
        if (a->st.allocated > a->st.peak_allocated)
            a->st.peak_allocated = a->st.allocated;
        publish(a);
    }
    pthread_mutex_unlock(&a->mu);
    return p;
}

void *gpu_alloc_get(struct gpu_alloc *a, size_t bytes, struct err *e)
{
    return get(a, bytes, false, e);
}

void *gpu_alloc_spare(struct gpu_alloc *a, size_t bytes, struct err *e)
{
    return get(a, bytes, true, e);
}

void gpu_alloc_put(struct gpu_alloc *a, void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->n; i++) {
        struct block *b = &a->blocks[i];
        if (b->ptr == p && b->in_use) {
            b->in_use = false;
            a->st.allocated -= b->size;
            publish(a);
            break;
        }
    }
    pthread_mutex_unlock(&a->mu);
}

void gpu_alloc_set_reclaim(struct gpu_alloc *a, bool (*reclaim)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&a->mu);
    a->reclaim = reclaim;
    a->reclaim_ctx = ctx;
    pthread_mutex_unlock(&a->mu);
}

void gpu_alloc_stats(struct gpu_alloc *a, struct gpu_mem_stats *out)
{
    pthread_mutex_lock(&a->pub_mu);
    *out = a->pub;
    pthread_mutex_unlock(&a->pub_mu);
}

int gpu_alloc_empty_cache(struct gpu_alloc *a, struct err *e)
{
    pthread_mutex_lock(&a->mu);
    free_blocks(a, true);
    pthread_mutex_unlock(&a->mu);
    return 0;
}

/* ---- pinned host memory ---- */

static void *pinned_alloc(void *ctx, size_t bytes, struct err *e)
{
    void *p = NULL;
    cudaError_t rc;
    /* A thread with no device set would make (and keep) a context on device 0 here. */
    int cur = -1;
    if (ctx && (cudaGetDevice(&cur) != cudaSuccess || cur != *(const int *)ctx) &&
        (rc = cudaSetDevice(*(const int *)ctx)) != cudaSuccess) {
        gpu_cuda_fail(e, __FILE__, __LINE__, "cudaSetDevice", rc);
        return NULL;
    }
    rc = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
    if (rc != cudaSuccess) {
        gpu_cuda_fail(e, __FILE__, __LINE__, "cudaHostAlloc", rc);
        if (e && rc == cudaErrorMemoryAllocation)
            e->code = ERR_NOMEM;   /* host memory, not the device's */
        return NULL;
    }
    return p;
}

static void pinned_free(void *ctx, void *p)
{
    int cur = -1;
    if (p && ctx && (cudaGetDevice(&cur) != cudaSuccess || cur != *(const int *)ctx))
        CUDA_IGNORE(cudaSetDevice(*(const int *)ctx));   /* as in pinned_alloc */
    if (p)
        CUDA_IGNORE(cudaFreeHost(p));
}

struct gpu_host_allocator gpu_pinned_allocator(void)
{
    return (struct gpu_host_allocator){pinned_alloc, pinned_free, NULL};
}

struct gpu_host_allocator gpu_pinned_allocator_on(const int *device)
{
    return (struct gpu_host_allocator){pinned_alloc, pinned_free, (void *)device};
}
