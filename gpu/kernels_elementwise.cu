/* kernels_elementwise.cu — unary, binary, copy/axpby, fill/scale and the MSE gradient over strided views. */
#include "kernels_common.cuh"

/*
 * Arithmetic follows core/be_cpu_loops.h operation by operation (double for
 * unary/binary/axpby, T where the CPU uses T) and the .cu files are built with
 * --fmad=false, so every element equals the CPU backend's bit for bit.
 */

// out (it.shape), a (it.shape, any strides) -> out = beta * out + alpha * f(a)
template <typename T>
__global__ void unary_kernel(int op, gk_iter it, char *out, const char *a, double alpha,
                             double beta)
{
    GK_FOR_EACH(i, it.n) {
        int64_t off[2];
        gk_offsets<2>(it, i, off);
        T *o = (T *)(out + off[0]);
        double x = *(const T *)(a + off[1]), v = x * x;   /* BE_UN_SQUARE, the only one */
        if (alpha != 1)
            v *= alpha;
        *o = (T)(beta == 0 ? v : beta * (double)*o + v);
    }
}

// out (it.shape), a, b (it.shape; stride 0 where broadcast) -> out = beta * out + alpha * (a op b)
template <typename T>
__global__ void binary_kernel(int op, gk_iter it, char *out, const char *a, const char *b,
                              double alpha, double beta)
{
    GK_FOR_EACH(i, it.n) {
        int64_t off[3];
        gk_offsets<3>(it, i, off);
        T *o = (T *)(out + off[0]);
        double x = *(const T *)(a + off[1]), y = *(const T *)(b + off[2]), v;
        switch (op) {
        case 0: v = x + y; break;   /* BE_BIN_ADD */
        case 1: v = x - y; break;   /* BE_BIN_SUB */
        default: v = x * y; break;  /* BE_BIN_MUL */
        }
        /* alpha * v with alpha 1 is v exactly, so the CPU's three loops are this one. */
        *o = (T)(beta == 0 ? alpha * v : beta * (double)*o + alpha * v);
    }
}

// dst (it.shape), src (it.shape; stride 0 where broadcast) -> dst = beta * dst + alpha * (src / div)
template <typename T>
__global__ void axpby_kernel(gk_iter it, char *dst, const char *src, double alpha, double beta,
                             double div)
{
    GK_FOR_EACH(i, it.n) {
        int64_t off[2];
        gk_offsets<2>(it, i, off);
        T *d = (T *)(dst + off[0]);
        double v = alpha * ((double)*(const T *)(src + off[1]) / div);
        *d = (T)(beta == 0 ? v : beta * (double)*d + v);
    }
}

// t (it.shape) -> t = v, or t = t * v (in T)
template <typename T>
__global__ void fill_kernel(gk_iter it, char *t, double v, bool scale)
{
    const T tv = (T)v;
    GK_FOR_EACH(i, it.n) {
        int64_t off[1];
        gk_offsets<1>(it, i, off);
        T *d = (T *)(t + off[0]);
        *d = scale ? (T)(*d * tv) : tv;
    }
}

// g, p, t (it.shape), gout (1) -> g = beta * g + sign * (norm * (p - t)) * gout, in T like torch
template <typename T>
__global__ void mse_backward_kernel(gk_iter it, char *g, const char *p, const char *t,
                                    const char *gout, double norm, double beta, bool negate)
{
    const T tn = (T)norm, go = *(const T *)gout;
    GK_FOR_EACH(i, it.n) {
        int64_t off[3];
        gk_offsets<3>(it, i, off);
        T *gp = (T *)(g + off[0]);
        T diff = (T)(*(const T *)(p + off[1]) - *(const T *)(t + off[2]));
        T v = (T)(tn * diff) * go;
        if (negate)
            v = -v;
        *gp = beta == 0 ? v : (T)(beta * (double)*gp + (double)v);
    }
}

// c (n) = a (n) + b (n), contiguous float64: the benchmark's kernel
__global__ void add_f64_kernel(int64_t n, double *c, const double *a, const double *b)
{
    GK_FOR_EACH(i, n)
        c[i] = a[i] + b[i];
}

/* The launchers (GK_DISPATCH: one template instance per dtype). */
extern "C" cudaError_t gk_unary(cudaStream_t s, enum gk_dtype dt, int op, struct gk_iter it,
                                char *out, const char *a, double alpha, double beta)
{
    GK_DISPATCH(unary_kernel, it.n, op, it, out, a, alpha, beta);
}

extern "C" cudaError_t gk_binary(cudaStream_t s, enum gk_dtype dt, int op, struct gk_iter it,
                                 char *out, const char *a, const char *b, double alpha,
                                 double beta)
{
    GK_DISPATCH(binary_kernel, it.n, op, it, out, a, b, alpha, beta);
}

extern "C" cudaError_t gk_axpby(cudaStream_t s, enum gk_dtype dt, struct gk_iter it, char *dst,
                                const char *src, double alpha, double beta, double div)
{
    GK_DISPATCH(axpby_kernel, it.n, it, dst, src, alpha, beta, div);
}

extern "C" cudaError_t gk_fill(cudaStream_t s, enum gk_dtype dt, struct gk_iter it, char *t,
                               double v, bool scale)
{
    GK_DISPATCH(fill_kernel, it.n, it, t, v, scale);
}

extern "C" cudaError_t gk_mse_backward(cudaStream_t s, enum gk_dtype dt, struct gk_iter it,
                                       char *g, const char *p, const char *t, const char *gout,
                                       double norm, double beta, bool negate)
{
    GK_DISPATCH(mse_backward_kernel, it.n, it, g, p, t, gout, norm, beta, negate);
}

extern "C" cudaError_t gk_add_f64(cudaStream_t s, int64_t n, double *c, const double *a,
                                  const double *b)
{
    if (n == 0)
        return cudaSuccess;
    GK_LAUNCH(add_f64_kernel, gk_blocks(n), GK_THREADS, s, n, c, a, b);
    return cudaGetLastError();
}
