/* kernels_linear.cu — the linear model's forward, MSE and backward fused: residuals, then deterministic sums. */
#include "kernels_common.cuh"

/*
 * core/be_cpu_linear.c in three kernels, all arithmetic in double: (1) one thread per
 * row computes r_i = x_i . w + b - y_i exactly as the CPU's lm_block does (the same
 * pairing for its 8-feature fast path), so every residual has the CPU's bits; (2) block
 * (g, k) sums quantity k (r^2, r, then r x_j) over chunk g of the rows with a fixed
 * thread-to-row map and block_sum's fixed tree; (3) one block per quantity sums the
 * chunks the same way and writes loss = sum r^2 / n, gb = 2/n sum r, gw_j = 2/n sum r x_j.
 * No atomics: the same inputs give the same bits on every run. The chunked tree order
 * differs from the CPU's blocks of 8192 rows, so the sums agree to a few ulps.
 */

#define CHUNK (GK_THREADS * 32)   /* rows per block of pass (2) */
#define MAX_CHUNKS 1024
#define MAX_GRID_Y 65535

static int64_t chunks_for(int64_t n)
{
    int64_t g = (n + CHUNK - 1) / CHUNK;
    return g < 1 ? 1 : g > MAX_CHUNKS ? MAX_CHUNKS : g;
}

// x (n, f), w (f), b (1), y (n) -> r (n) = x w + b - y, in double
template <typename T>
__global__ void residual_kernel(gk_linear_mse a, const T *x, const T *w, const T *b,
                                const T *y, double *r)
{
    GK_FOR_EACH(i, a.n) {
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
        r[i] = (p + (double)b[0]) - (double)y[i * a.sy];
    }
}

/* Quantity k of row i: r^2, r, then r x_{k-2}. */
template <typename T>
__device__ __forceinline__ double quantity(const gk_linear_mse &a, const T *x, const double *r,
                                           int64_t i, int64_t k)
{
    double ri = r[i];
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

// x (n, f), r (n) -> partials (f + 2, G), or loss, gw, gb directly when G == 1
template <typename T>
__global__ void sums_kernel(gk_linear_mse a, const T *x, const double *r, double *partials,
                            int64_t G, T *loss, T *gw, T *gb)
{
    __shared__ double sh[GK_THREADS];
    const int64_t g = blockIdx.x, len = (a.n + G - 1) / G;
    const int64_t lo = g * len, hi = lo + len < a.n ? lo + len : a.n;
    for (int64_t k = blockIdx.y; k < a.f + 2; k += gridDim.y) {
        double acc = 0;
        for (int64_t i = lo + threadIdx.x; i < hi; i += GK_THREADS)
            acc += quantity(a, x, r, i, k);
        acc = block_sum(acc, sh);
        if (threadIdx.x == 0) {
            if (G == 1)
                finish(a, k, acc, loss, gw, gb);
            else
                partials[k * G + g] = acc;
        }
    }
}

// partials (f + 2, G) -> loss, gw, gb
template <typename T>
__global__ void totals_kernel(gk_linear_mse a, const double *partials, int64_t G, T *loss, T *gw,
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
    return (size_t)a->n + (G == 1 ? 0 : (size_t)((a->f + 2) * G));
}

template <typename T>
static cudaError_t run(cudaStream_t s, const gk_linear_mse &a, const T *x, const T *w,
                       const T *b, const T *y, T *loss, T *gw, T *gb, double *scratch)
{
    double *r = scratch, *partials = scratch + a.n;
    int64_t G = chunks_for(a.n), q = a.f + 2;
    if (a.n > 0) {
        GK_LAUNCH(residual_kernel<T>, gk_blocks(a.n), GK_THREADS, s, a, x, w, b, y, r);
        cudaError_t rc = cudaGetLastError();
        if (rc != cudaSuccess)
            return rc;
    }
    dim3 grid((unsigned)G, (unsigned)(q < MAX_GRID_Y ? q : MAX_GRID_Y));
    GK_LAUNCH_SYNC(sums_kernel<T>, grid, GK_THREADS, s, a, x, r, partials, G, loss, gw, gb);
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
{
    if (a->dt == GK_F64)
        return run<double>(s, *a, (const double *)x, (const double *)w, (const double *)b,
                           (const double *)y, (double *)loss, (double *)gw, (double *)gb,
                           scratch);
    return run<float>(s, *a, (const float *)x, (const float *)w, (const float *)b,
                      (const float *)y, (float *)loss, (float *)gw, (float *)gb, scratch);
}
