/* kernels_linear.cu — the linear model's forward, MSE and backward fused: one pass over the batch, then deterministic totals. */
#include "kernels_common.cuh"

/*
 * core/be_cpu_linear.c in two kernels, all arithmetic in double: (1) block (g, kb) walks
 * chunk g of the rows with a fixed thread-to-row map; each thread computes a row's
 * residual r_i = x_i . w + b - y_i exactly as the CPU's lm_block does (the same pairing
 * for its 8-feature fast path, so every residual has the CPU's bits) and adds it into up
 * to QB running sums (r^2, r, then r x_j), which block_sum's fixed tree then reduces;
 * (2) one block per quantity sums the chunks the same way and writes loss = sum r^2 / n,
 * gb = 2/n sum r, gw_j = 2/n sum r x_j. With the DC-taxi shape (8 features, 10 sums) the
 * batch is read from memory once: no residual vector goes out and back. No atomics: the
 * same inputs give the same bits on every run. The chunked tree order differs from the
 * CPU's blocks of 8192 rows, so the sums agree to a few ulps.
 */

#define QB 10                    /* sums a block keeps in registers: r^2, r and 8 features */
#define CHUNK (GK_THREADS * 4)   /* rows per block of pass (1): 1024 blocks for 2^20 rows */
#define MAX_CHUNKS 1024
#define MAX_GRID_Y 65535

static int64_t chunks_for(int64_t n)
{
    int64_t g = (n + CHUNK - 1) / CHUNK;
    return g < 1 ? 1 : g > MAX_CHUNKS ? MAX_CHUNKS : g;
}

/* x (n, f), w (f), b (1), y (n) -> r_i = x_i w + b - y_i, in double */
template <typename T>
__device__ __forceinline__ double residual(const gk_linear_mse &a, const T *x, const T *w,
                                           const T *b, const T *y, int64_t i)
{
    const T *xr = x + i * a.sx0;
    double p = 0;
    if (a.sx1 == 1 && a.f == 8) {   /* the DC-taxi shape: the CPU's pairing */
        double x0 = xr[0], x1 = xr[1], x2 = xr[2], x3 = xr[3], x4 = xr[4], x5 = xr[5],
               x6 = xr[6], x7 = xr[7];
        const int64_t s = a.sw;
        p = ((x0 * (double)w[0] + x1 * (double)w[s]) +
             (x2 * (double)w[2 * s] + x3 * (double)w[3 * s])) +
            ((x4 * (double)w[4 * s] + x5 * (double)w[5 * s]) +
             (x6 * (double)w[6 * s] + x7 * (double)w[7 * s]));
    } else {
        for (int64_t k = 0; k < a.f; k++)
            p += (double)xr[k * a.sx1] * (double)w[k * a.sw];
    }
    return (p + (double)b[0]) - (double)y[i * a.sy];
}

/* Quantity k of row i, whose residual is ri: r^2, r, then r x_{k-2}. */
template <typename T>
__device__ __forceinline__ double quantity(const gk_linear_mse &a, const T *x, double ri,
                                           int64_t i, int64_t k)
{
    if (k == 0)
        return ri * ri;
    if (k == 1)
        return ri;
    return ri * (double)x[i * a.sx0 + (k - 2) * a.sx1];
}

/* Writes quantity k's total where it belongs. */
template <typename T>
__device__ __forceinline__ void finish(const gk_linear_mse &a, int64_t k, double total, T *loss,
                                       T *gw, T *gb)
{
    double norm = 2.0 / (double)a.n;
    if (k == 0)
        *loss = (T)(total / (double)a.n);
    else if (k == 1)
        *gb = (T)(norm * total);
    else
        gw[k - 2] = (T)(norm * total);
}

// x (n, f), w (f), b (1), y (n) -> partials (f + 2, G), or loss, gw, gb directly when G == 1
template <typename T>
GK_BLOCK_KERNEL sums_kernel(gk_linear_mse a, const T *x, const T *w, const T *b, const T *y,
                            double *partials, int64_t G, T *loss, T *gw, T *gb)
{
    __shared__ double sh[GK_THREADS];
    const int64_t g = blockIdx.x, len = (a.n + G - 1) / G, q = a.f + 2;
    const int64_t lo = g * len, hi = lo + len < a.n ? lo + len : a.n;
    /* Sums k0 .. k0 + QB - 1 of the q; more than QB (over 8 features) take more y blocks,
     * each reading its rows again. k0 is the same for every thread: no divergent tree. */
    for (int64_t k0 = (int64_t)blockIdx.y * QB; k0 < q; k0 += (int64_t)gridDim.y * QB) {
        double acc[QB];
#pragma unroll
        for (int j = 0; j < QB; j++)
            acc[j] = 0;
        for (int64_t i = lo + threadIdx.x; i < hi; i += GK_THREADS) {
            const double ri = residual(a, x, w, b, y, i);
#pragma unroll
            for (int j = 0; j < QB; j++)
                if (k0 + j < q)
                    acc[j] += quantity(a, x, ri, i, k0 + j);
        }
#pragma unroll
        for (int j = 0; j < QB; j++) {
            if (k0 + j >= q)
                break;
            const double total = block_sum(acc[j], sh);
            if (threadIdx.x == 0) {
                if (G == 1)
                    finish(a, k0 + j, total, loss, gw, gb);
                else
                    partials[(k0 + j) * G + g] = total;
            }
        }
    }
}

// partials (f + 2, G) -> loss, gw, gb
template <typename T>
GK_BLOCK_KERNEL totals_kernel(gk_linear_mse a, const double *partials, int64_t G, T *loss, T *gw,
                              T *gb)
{
    __shared__ double sh[GK_THREADS];
    for (int64_t k = blockIdx.x; k < a.f + 2; k += gridDim.x) {
        double acc = 0;
        for (int64_t j = threadIdx.x; j < G; j += GK_THREADS)
            acc += partials[k * G + j];
        acc = block_sum(acc, sh);
        if (threadIdx.x == 0)
            finish(a, k, acc, loss, gw, gb);
    }
}

extern "C" size_t gk_linear_mse_scratch(const struct gk_linear_mse *a)
{
    int64_t G = chunks_for(a->n);
    return G == 1 ? 0 : (size_t)((a->f + 2) * G);
}

template <typename T>
static cudaError_t run(cudaStream_t s, const gk_linear_mse &a, const T *x, const T *w,
                       const T *b, const T *y, T *loss, T *gw, T *gb, double *partials)
{
    int64_t G = chunks_for(a.n), q = a.f + 2, ys = (q + QB - 1) / QB;
    dim3 grid((unsigned)G, (unsigned)(ys < MAX_GRID_Y ? ys : MAX_GRID_Y));
    GK_LAUNCH_SYNC(sums_kernel<T>, grid, GK_THREADS, s, a, x, w, b, y, partials, G, loss, gw,
                   gb);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess || G == 1)
        return rc;
    unsigned blocks = (unsigned)(q < GK_MAX_BLOCKS ? q : GK_MAX_BLOCKS);
    GK_LAUNCH_SYNC(totals_kernel<T>, blocks, GK_THREADS, s, a, partials, G, loss, gw, gb);
    return cudaGetLastError();
}

extern "C" cudaError_t gk_linear_mse_run(cudaStream_t s, const struct gk_linear_mse *a,
                                         const char *x, const char *w, const char *b,
                                         const char *y, char *loss, char *gw, char *gb,
                                         double *scratch)
{   /* scratch: the partials (gk_linear_mse_scratch doubles) */
    if (a->dt == GK_F64)
        return run<double>(s, *a, (const double *)x, (const double *)w, (const double *)b,
                           (const double *)y, (double *)loss, (double *)gw, (double *)gb,
                           scratch);
    return run<float>(s, *a, (const float *)x, (const float *)w, (const float *)b,
                      (const float *)y, (float *)loss, (float *)gw, (float *)gb, scratch);
}
