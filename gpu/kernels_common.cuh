/* kernels_common.cuh — gpu-internal: grid sizing and strided offsets shared by the kernels. */
#ifndef TRAIND_GPU_KERNELS_COMMON_CUH
#define TRAIND_GPU_KERNELS_COMMON_CUH

#include "kernels.h"

#define GK_THREADS 256
#define GK_MAX_BLOCKS 65535
/* A kernel whose block meets in block_sum/block_max: their tree and shared array are
 * GK_THREADS wide, so a launch with more threads fails (too many resources) rather than
 * writing past the array. */
#define GK_BLOCK_KERNEL __global__ void __launch_bounds__(GK_THREADS)

/* Blocks for a grid-stride loop over n elements. */
static inline unsigned gk_blocks(int64_t n)
{
    int64_t b = (n + GK_THREADS - 1) / GK_THREADS;
    return (unsigned)(b < 1 ? 1 : b > GK_MAX_BLOCKS ? GK_MAX_BLOCKS : b);
}

/* Byte offsets of element i (row-major over it.shape) in the first NOP operands. */
template <int NOP>
__device__ __forceinline__ void gk_offsets(const gk_iter &it, int64_t i, int64_t *off)
{
    if (it.nd == 1) {
#pragma unroll
        for (int o = 0; o < NOP; o++)
            off[o] = i * it.st[o][0];
        return;
    }
#pragma unroll
    for (int o = 0; o < NOP; o++)
        off[o] = 0;
    for (int d = it.nd - 1; d >= 0; d--) {
        int64_t q = i / it.shape[d], r = i - q * it.shape[d];
#pragma unroll
        for (int o = 0; o < NOP; o++)
            off[o] += r * it.st[o][d];
        i = q;
    }
}

/* The same for operands 1 and 2 only (a reduction's inner walk has no output operand). */
__device__ __forceinline__ void gk_offsets_ab(const gk_iter &it, int64_t i, int64_t *oa,
                                              int64_t *ob)
{
    if (it.nd == 1) {
        *oa = i * it.st[1][0];
        *ob = i * it.st[2][0];
        return;
    }
    int64_t a = 0, b = 0;
    for (int d = it.nd - 1; d >= 0; d--) {
        int64_t q = i / it.shape[d], r = i - q * it.shape[d];
        a += r * it.st[1][d];
        b += r * it.st[2][d];
        i = q;
    }
    *oa = a;
    *ob = b;
}

/* Sum over the block's GK_THREADS threads in a fixed tree; every thread must call it (a
 * GK_LAUNCH_SYNC kernel) and every thread gets the result. */
__device__ __forceinline__ double block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = GK_THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double out = sh[0];
    __syncthreads();   /* sh is reused by the caller's next sum */
    return out;
}

/* The same with fmax (exact, so any tree gives the serial loop's result). */
__device__ __forceinline__ double block_max(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = GK_THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            sh[threadIdx.x] = fmax(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    double out = sh[0];
    __syncthreads();
    return out;
}

/*
 * Launches. GK_LAUNCH_SYNC marks kernels whose threads meet at __syncthreads; the
 * distinction matters only to the host emulation the tests can build (tests/gpu/emu).
 */
#ifndef GK_EMULATE
#define GK_LAUNCH(kernel, grid, block, stream, ...) kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#define GK_LAUNCH_SYNC GK_LAUNCH
#endif

/*
 * The usual launcher body: kernel's instance for dt (double or float) over a grid-stride grid
 * of n, returning the launch's error. Uses the launcher's s and dt.
 */
#define GK_DISPATCH(kernel, n, ...)                                                        \
    do {                                                                                   \
        if ((n) == 0)                                                                      \
            return cudaSuccess;                                                            \
        if (dt == GK_F64)                                                                  \
            GK_LAUNCH(kernel<double>, gk_blocks(n), GK_THREADS, s, __VA_ARGS__);           \
        else                                                                               \
            GK_LAUNCH(kernel<float>, gk_blocks(n), GK_THREADS, s, __VA_ARGS__);            \
        return cudaGetLastError();                                                         \
    } while (0)

#define GK_FOR_EACH(i, n)                                                          \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);       \
         i += (int64_t)gridDim.x * blockDim.x)

#endif
