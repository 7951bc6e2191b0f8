/* bench_add.h — the PyTorch example's add benchmark: CPU vs GPU over 2^0 .. 2^27 elements. */
#ifndef TRAIND_GPU_BENCH_ADD_H
#define TRAIND_GPU_BENCH_ADD_H

#include <stdio.h>

#include "err.h"

/*
 * Adds two float64 vectors of 2^0 ... 2^27 elements on the CPU (a plain loop,
 * clock_gettime) and on cuda:device (CUDA events, the device made current in the
 * calling thread), min over repeats, and prints a line naming the GPU, then
 * `size  cpu_s  gpu_s  gpu_with_copy_s  ratio` (ratio = cpu_s / gpu_s; gpu_with_copy_s
 * adds the H2D copies of both inputs and the D2H of the result, from pinned host
 * memory). Needs about 3 GiB of host and 3 GiB of device memory.
 */
int gpu_bench_add(FILE *out, int device, struct err *e);

/* The same up to 2^max_log2 elements with `repeats` timed runs per size (tests use small ones). */
int gpu_bench_add_sizes(FILE *out, int device, int max_log2, int repeats, struct err *e);

#endif
