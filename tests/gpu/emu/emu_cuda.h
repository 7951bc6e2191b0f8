/* emu_cuda.h — compiles gpu/kernels_*.cu as host C++: CUDA qualifiers, thread indices and launches emulated. */
#ifndef TRAIND_TEST_GPU_EMU_CUDA_H
#define TRAIND_TEST_GPU_EMU_CUDA_H

/*
 * A test device for machines without a GPU: the kernels' own source runs on the
 * host, blocks one after another, and the threads of a block either one after
 * another (kernels without __syncthreads) or as 256 real threads meeting at a
 * barrier (GK_LAUNCH_SYNC). It checks index arithmetic, reductions, epilogues and
 * the backend's host code; it says nothing about the real compiler, memory model
 * or hardware.
 */
#define GK_EMULATE 1

#include <cuda_runtime_api.h>
#include <math.h>

#include <functional>

#undef __host__
#undef __device__
#undef __global__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static   /* one block runs at a time */

extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

void __syncthreads(void);

/* CUDA's atomicMin on a 64-bit unsigned: the old value; threads of a GK_LAUNCH_SYNC block
 * run at once, so a compare-and-swap loop. */
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v)
{
    unsigned long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v < old &&
           !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}

void gk_emu_launch(dim3 grid, dim3 block, bool threaded, const std::function<void()> &body);
/* A kernel launched on s runs after s's queued copies (emu_runtime.cpp). */
void gk_emu_stream_touch(cudaStream_t s);
/* Does [p, p + bytes) lie inside one live cudaMalloc block? */
bool gk_emu_on_device(const void *p, size_t bytes);
/* Has a fault lost the emulated device's context? */
bool gk_emu_lost(void);

#define GK_LAUNCH(kernel, grid, block, stream, ...)                                      \
    do {                                                                                 \
        gk_emu_stream_touch(stream);                                                     \
        gk_emu_launch(dim3(grid), dim3(block), false, [&]() { kernel(__VA_ARGS__); });  \
    } while (0)
#define GK_LAUNCH_SYNC(kernel, grid, block, stream, ...)                                 \
    do {                                                                                 \
        gk_emu_stream_touch(stream);                                                     \
        gk_emu_launch(dim3(grid), dim3(block), true, [&]() { kernel(__VA_ARGS__); });   \
    } while (0)

#endif
