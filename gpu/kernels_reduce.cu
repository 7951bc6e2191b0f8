/* kernels_reduce.cu — deterministic sums: fixed-order tree reductions in two passes, no atomics. */
#include "kernels_common.cuh"

/*
 * Every output's sum is split into G chunks (G a function of the summed length
 * only); block (o, g) sums chunk g of output o with a fixed thread-to-element map
 * and a fixed shared-memory tree, and writes a partial; one block per output then
 * sums the G partials the same way. No float atomics, no dependence on the grid
 * the device happens to run: the same inputs give the same bits every run and on
 * every GPU. Accumulation is in double, as on the CPU. The order differs from the
 * CPU's pairwise sum, so the two agree to a few ulps, not bit for bit.
 */

#define SERIAL_MAX 16          /* sums this short: one thread per output, in index order */
#define CHUNK (GK_THREADS * 32) /* elements per block of pass 1 */
#define MAX_CHUNKS 1024

static int64_t chunks_for(int64_t n)
{
    int64_t g = (n + CHUNK - 1) / CHUNK;
    return g < 1 ? 1 : g > MAX_CHUNKS ? MAX_CHUNKS : g;
}

template <typename T>
__device__ __forceinline__ double load(enum gk_load how, const char *a, const char *b)
{
    double x = *(const T *)a;
    if (how == GK_LOAD_X)
        return x;
    if (how == GK_LOAD_SQ)
        return x * x;
    double y = *(const T *)b;
    if (how == GK_LOAD_BCE) {   /* core/be_cpu_nn_loops.h's bce_inner, term by term */
        double m = x < 0 ? -x : 0;
        return (1 - y) * x + m + log(exp(-m) + exp(-x - m));
    }
    double d = x - y;
    return d * d;
}

/* out = beta * out + alpha * (sum / div), rounded once to the output's type. */
template <typename TO>
__device__ __forceinline__ void epilogue(const gk_reduce &r, char *out, double sum)
{
    TO *d = (TO *)out;
    double v = r.alpha * (sum / r.div);
    *d = (TO)(r.beta == 0 ? v : r.beta * (double)*d + v);
}

// a, b (outer.shape x inner.shape) -> out (outer.shape): one thread per output, in order
template <typename T, typename TO>
__global__ void reduce_serial(gk_reduce r, char *out, const char *a, const char *b)
{
    GK_FOR_EACH(o, r.outer.n) {
        int64_t off[3];
        gk_offsets<3>(r.outer, o, off);
        double acc = 0;
        for (int64_t j = 0; j < r.inner.n; j++) {
            int64_t ja, jb;
            gk_offsets_ab(r.inner, j, &ja, &jb);
            acc += load<T>(r.load, a + off[1] + ja, b + off[2] + jb);
        }
        epilogue<TO>(r, out + off[0], acc);
    }
}

// a, b (outer.shape x inner.shape) -> partials (outer.n, G), or out (outer.shape) when G == 1
template <typename T, typename TO>
GK_BLOCK_KERNEL reduce_pass1(gk_reduce r, char *out, const char *a, const char *b,
                             double *partials, int64_t G)
{
    __shared__ double sh[GK_THREADS];
    const int64_t g = blockIdx.y, len = (r.inner.n + G - 1) / G;
    const int64_t lo = g * len, hi = lo + len < r.inner.n ? lo + len : r.inner.n;
    for (int64_t o = blockIdx.x; o < r.outer.n; o += gridDim.x) {
        int64_t off[3];
        gk_offsets<3>(r.outer, o, off);
        double acc = 0;
        for (int64_t j = lo + threadIdx.x; j < hi; j += GK_THREADS) {
            int64_t ja, jb;
            gk_offsets_ab(r.inner, j, &ja, &jb);
            acc += load<T>(r.load, a + off[1] + ja, b + off[2] + jb);
        }
        acc = block_sum(acc, sh);
        if (threadIdx.x == 0) {
            if (G == 1)
                epilogue<TO>(r, out + off[0], acc);
            else
                partials[o * G + g] = acc;
        }
    }
}

// partials (outer.n, G) -> out (outer.shape)
template <typename TO>
GK_BLOCK_KERNEL reduce_pass2(gk_reduce r, char *out, const double *partials, int64_t G)
{
    __shared__ double sh[GK_THREADS];
    for (int64_t o = blockIdx.x; o < r.outer.n; o += gridDim.x) {
        double acc = 0;
        for (int64_t j = threadIdx.x; j < G; j += GK_THREADS)
            acc += partials[o * G + j];
        acc = block_sum(acc, sh);
        if (threadIdx.x == 0) {
            int64_t off[1];
            gk_offsets<1>(r.outer, o, off);
            epilogue<TO>(r, out + off[0], acc);
        }
    }
}

extern "C" size_t gk_reduce_scratch(const struct gk_reduce *r)
{
    if (r->inner.n <= SERIAL_MAX)
        return 0;
    int64_t G = chunks_for(r->inner.n);
    return G == 1 ? 0 : (size_t)(r->outer.n * G);
}

template <typename T, typename TO>
static cudaError_t run(cudaStream_t s, const gk_reduce &r, char *out, const char *a,
                       const char *b, double *scratch)
{
    if (r.inner.n <= SERIAL_MAX) {
        auto serial = reduce_serial<T, TO>;   /* an alias: the macro cannot take "<T, TO>" */
        GK_LAUNCH(serial, gk_blocks(r.outer.n), GK_THREADS, s, r, out, a, b);
        return cudaGetLastError();
    }
    int64_t G = chunks_for(r.inner.n);
    unsigned ox = (unsigned)(r.outer.n < GK_MAX_BLOCKS ? r.outer.n : GK_MAX_BLOCKS);
    auto pass1 = reduce_pass1<T, TO>;
    GK_LAUNCH_SYNC(pass1, dim3(ox, (unsigned)G), GK_THREADS, s, r, out, a, b, scratch, G);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess || G == 1)
        return rc;
    GK_LAUNCH_SYNC(reduce_pass2<TO>, ox, GK_THREADS, s, r, out, scratch, G);
    return cudaGetLastError();
}

extern "C" cudaError_t gk_reduce_run(cudaStream_t s, const struct gk_reduce *r, char *out,
                                     const char *a, const char *b, double *scratch)
{
    if (r->outer.n == 0)
        return cudaSuccess;
    if (r->in_f64)
        return r->dt == GK_F64 || r->out_f64 ? run<double, double>(s, *r, out, a, b, scratch)
                                             : run<double, float>(s, *r, out, a, b, scratch);
    if (r->dt == GK_F64)
        return run<double, double>(s, *r, out, a, b, scratch);
    if (r->out_f64)
        return run<float, double>(s, *r, out, a, b, scratch);
    return run<float, float>(s, *r, out, a, b, scratch);
}
