/* emu_runtime.cpp — the host emulation's CUDA runtime and cuBLAS: device memory is checked host memory. */
#include "emu_cuda.h"

#include <cublas_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <map>
#include <mutex>

/*
 * Calls complete before they return (streams and events are tokens). Every device
 * pointer a copy, memset or GEMM touches must lie inside one live cudaMalloc block,
 * so layout mistakes fail here as they would fault on a GPU. The emulated device
 * has EMU_MEMORY bytes, so an impossible request fails with cudaErrorMemoryAllocation.
 */
#define EMU_MEMORY ((size_t)8 << 30)

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

namespace {

std::mutex mu;
std::map<const char *, size_t> blocks;   /* live device allocations */
size_t in_use;
thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;

cudaError_t fail(cudaError_t rc)
{
    last_error = rc;
    return rc;
}

/* Is [p, p + bytes) inside one live device block? */
bool on_device(const void *p, size_t bytes)
{
    std::lock_guard<std::mutex> g(mu);
    const char *c = (const char *)p;
    auto it = blocks.upper_bound(c);
    if (it == blocks.begin())
        return false;
    --it;
    return c >= it->first && c + bytes <= it->first + it->second;
}

/* ---- threads of a block that meet at __syncthreads ---- */

struct block_pool {
    unsigned n = 0;
    pthread_t *th = nullptr;
    pthread_barrier_t start, end, sync;
    const std::function<void()> *body = nullptr;
    uint3 block;
    dim3 grid, bdim;
};
block_pool pool;
thread_local bool in_pool = false;

void *pool_worker(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    in_pool = true;
    for (;;) {
        pthread_barrier_wait(&pool.start);
        threadIdx = {i % pool.bdim.x, (i / pool.bdim.x) % pool.bdim.y, i / (pool.bdim.x * pool.bdim.y)};
        blockIdx = pool.block;
        gridDim = pool.grid;
        blockDim = pool.bdim;
        (*pool.body)();
        pthread_barrier_wait(&pool.end);
    }
    return nullptr;
}

void pool_start(unsigned n)
{
    if (pool.n == n)
        return;
    if (pool.n != 0) {
        fprintf(stderr, "emu: block size changed from %u to %u threads\n", pool.n, n);
        abort();
    }
    pool.n = n;
    pool.th = (pthread_t *)calloc(n, sizeof *pool.th);
    pthread_barrier_init(&pool.start, nullptr, n + 1);
    pthread_barrier_init(&pool.end, nullptr, n + 1);
    pthread_barrier_init(&pool.sync, nullptr, n);
    for (unsigned i = 0; i < n; i++)
        if (pthread_create(&pool.th[i], nullptr, pool_worker, (void *)(uintptr_t)i))
            abort();
}

} // namespace

void __syncthreads(void)
{
    if (!in_pool) {
        fprintf(stderr, "emu: __syncthreads in a kernel launched with GK_LAUNCH, not GK_LAUNCH_SYNC\n");
        abort();
    }
    pthread_barrier_wait(&pool.sync);
}

void gk_emu_launch(dim3 grid, dim3 block, bool threaded, const std::function<void()> &body)
{
    if (block.x * block.y * block.z > 1024 || grid.y > 65535 || grid.z > 65535) {
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    unsigned nt = block.x * block.y * block.z;
    if (threaded) {
        pool_start(nt);
        pool.body = &body;
        pool.grid = grid;
        pool.bdim = block;
    }
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                if (threaded) {
                    pool.block = {x, y, z};
                    pthread_barrier_wait(&pool.start);
                    pthread_barrier_wait(&pool.end);
                    continue;
                }
                blockIdx = {x, y, z};
                gridDim = grid;
                blockDim = block;
                for (unsigned t = 0; t < nt; t++) {
                    threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                    body();
                }
            }
}

extern "C" {

/* ---- devices ---- */

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
    if (d != 0)
        return fail(cudaErrorInvalidDevice);
    current_device = d;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
    *d = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    if (d != 0)
        return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "traind host emulation");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->totalGlobalMem = EMU_MEMORY;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int d)
{
    if (d != 0)
        return fail(cudaErrorInvalidDevice);
    *v = attr == cudaDevAttrComputeCapabilityMajor ? 9 : 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int d)
{
    if (d != 0)
        return fail(cudaErrorInvalidDevice);
    snprintf(id, (size_t)len, "0000:00:00.0");
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t rc = last_error;
    last_error = cudaSuccess;
    return rc;
}

const char *cudaGetErrorString(cudaError_t rc)
{
    switch (rc) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    default: return "emulated CUDA error";
    }
}

const char *cudaGetErrorName(cudaError_t rc)
{
    switch (rc) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    default: return "cudaErrorUnknown";
    }
}

/* ---- memory ---- */

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    std::lock_guard<std::mutex> g(mu);
    *p = nullptr;
    if (bytes > EMU_MEMORY - in_use)
        return fail(cudaErrorMemoryAllocation);
    char *c = (char *)malloc(bytes ? bytes : 1);
    if (!c)
        return fail(cudaErrorMemoryAllocation);
    blocks[c] = bytes;
    in_use += bytes;
    *p = c;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p)
        return cudaSuccess;
    std::lock_guard<std::mutex> g(mu);
    auto it = blocks.find((const char *)p);
    if (it == blocks.end())
        return fail(cudaErrorInvalidValue);
    in_use -= it->second;
    blocks.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
    std::lock_guard<std::mutex> g(mu);
    *free_b = EMU_MEMORY - in_use;
    *total = EMU_MEMORY;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags)
{
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    bool ok = kind == cudaMemcpyHostToDevice   ? on_device(dst, bytes)
              : kind == cudaMemcpyDeviceToHost ? on_device(src, bytes)
              : kind == cudaMemcpyDeviceToDevice ? on_device(dst, bytes) && on_device(src, bytes)
                                                 : false;
    if (!ok)
        return fail(cudaErrorInvalidValue);
    if (bytes)
        memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s)
{
    if (!on_device(p, bytes))
        return fail(cudaErrorInvalidValue);
    memset(p, v, bytes);
    return cudaSuccess;
}

/* ---- streams and events: tokens, since every call has finished when it returns ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    *s = (cudaStream_t)malloc(1);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    free(s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
    return ev ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags)
{
    *ev = (cudaEvent_t)calloc(1, sizeof(double));
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *ev)
{
    return cudaEventCreateWithFlags(ev, 0);
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    free(ev);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *(double *)ev = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    *ms = (float)(*(double *)b - *(double *)a);
    if (*ms <= 0)
        *ms = 1e-6f;
    return cudaSuccess;
}

/* ---- cuBLAS: column-major GEMM with cuBLAS's argument rules ---- */

struct cublasContext {
    cudaStream_t stream;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = (cublasHandle_t)calloc(1, sizeof(struct cublasContext));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t st)
{
    return st == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE";
}

} // extern "C"

namespace {

/* C (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C, column-major; beta 0 never reads C. */
template <typename T>
cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha,
                    const T *A, int lda, const T *B, int ldb, T beta, T *C, int ldc)
{
    bool na = ta == CUBLAS_OP_N, nb = tb == CUBLAS_OP_N;
    if (m < 0 || n < 0 || k < 0 || lda < (na ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
        ldb < (nb ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    /* the last element each operand reaches must be device memory */
    size_t ea = (size_t)lda * (size_t)((na ? k : m) - 1) + (size_t)(na ? m : k);
    size_t eb = (size_t)ldb * (size_t)((nb ? n : k) - 1) + (size_t)(nb ? k : n);
    size_t ec = (size_t)ldc * (size_t)(n - 1) + (size_t)m;
    if ((k > 0 && (!on_device(A, ea * sizeof(T)) || !on_device(B, eb * sizeof(T)))) ||
        !on_device(C, ec * sizeof(T)))
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            T acc = 0;
            for (int l = 0; l < k; l++) {
                T a = na ? A[i + (size_t)l * lda] : A[l + (size_t)i * lda];
                T b = nb ? B[l + (size_t)j * ldb] : B[j + (size_t)l * ldb];
                acc += a * b;
            }
            T *c = &C[i + (size_t)j * ldc];
            *c = beta == 0 ? alpha * acc : alpha * acc + beta * *c;
        }
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

cublasStatus_t cublasDgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const double *alpha, const double *A, int lda,
                              const double *B, int ldb, const double *beta, double *C, int ldc)
{
    return gemm<double>(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc)
{
    return gemm<float>(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
}

} // extern "C"
