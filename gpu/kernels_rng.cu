/* kernels_rng.cu — device-side uniform init from Philox4x32-10 (philox.h), reproducible for any grid. */
#include "kernels_common.cuh"
#include "philox.h"

// out (n) -> out[i] = uniform(seed, offset + i) in [lo, hi)
template <typename T>
__global__ void philox_uniform_kernel(int64_t n, T *out, uint64_t seed, uint64_t offset,
                                      double lo, double hi)
{
    GK_FOR_EACH(i, n) {
        if (sizeof(T) == sizeof(double))
            out[i] = (T)philox_uniform_f64(seed, offset + (uint64_t)i, lo, hi);
        else
            out[i] = (T)philox_uniform_f32(seed, offset + (uint64_t)i, (float)lo, (float)hi);
    }
}

extern "C" cudaError_t gk_philox_uniform(cudaStream_t s, enum gk_dtype dt, int64_t n, char *out,
                                         uint64_t seed, uint64_t offset, double lo, double hi)
{
    if (n == 0)
        return cudaSuccess;
    if (dt == GK_F64)
        GK_LAUNCH(philox_uniform_kernel<double>, gk_blocks(n), GK_THREADS, s, n, (double *)out,
                  seed, offset, lo, hi);
    else
        GK_LAUNCH(philox_uniform_kernel<float>, gk_blocks(n), GK_THREADS, s, n, (float *)out,
                  seed, offset, lo, hi);
    return cudaGetLastError();
}
