/* kernels_act.cu — activations and their gradients, bias + activation and the BCE gradient over strided views. */
#include "kernels_common.cuh"

/*
 * Statement by statement as core/be_cpu_nn_loops.h: relu and the bias add in T, everything
 * else in double rounded once to T; built with --fmad=false. relu is exact on both sides, so
 * it equals the CPU's bit for bit; exp and tanh are CUDA's double-precision libm, within an
 * ulp or two of glibc's, so results built on them agree to a few ulps in float64 (and almost
 * always exactly once rounded to float32).
 */

/* f(x) of the CPU's act_inner (relu excluded: it stays in T). */
__device__ __forceinline__ double act_value(int op, double x)
{
    return op == GK_ACT_SIGMOID ? 1.0 / (1.0 + exp(-x)) : tanh(x);
}

/* f'(.) of the CPU's act_bw_inner, from the output y. */
__device__ __forceinline__ double act_deriv(int op, double v)
{
    switch (op) {
    case GK_ACT_RELU: return v > 0 ? 1.0 : 0.0;
    case GK_ACT_SIGMOID: return (1.0 - v) * v;
    default: return 1.0 - v * v;   /* GK_ACT_TANH */
    }
}

// out (it.shape), a (it.shape, any strides) -> out = f(a)
template <typename T>
__global__ void act_kernel(int op, gk_iter it, char *out, const char *a)
{
    GK_FOR_EACH(i, it.n) {
        int64_t off[2];
        gk_offsets<2>(it, i, off);
        T x = *(const T *)(a + off[1]);
        T *o = (T *)(out + off[0]);
        /* torch's threshold: x <= 0 ? 0 : x, so NaN stays NaN */
        *o = op == GK_ACT_RELU ? (x <= 0 ? (T)0 : x) : (T)act_value(op, (double)x);
    }
}

// gin, v, gout (it.shape, any strides) -> gin = beta * gin + gout * f'(v)
template <typename T>
__global__ void act_backward_kernel(int op, gk_iter it, char *gin, const char *v,
                                    const char *gout, double beta)
{
    GK_FOR_EACH(i, it.n) {
        int64_t off[3];
        gk_offsets<3>(it, i, off);
        T *gi = (T *)(gin + off[0]);
        T vv = *(const T *)(v + off[1]), g = *(const T *)(gout + off[2]);
        if (op == GK_ACT_RELU && beta == 0) {   /* the CPU's branch-free path: a select in T */
            *gi = vv <= 0 ? (T)0 : g;
            continue;
        }
        double r = (double)g * act_deriv(op, (double)vv);
        *gi = (T)(beta == 0 ? r : beta * (double)*gi + r);
    }
}

// out (rows, cols) contiguous, b (cols) -> out = f(out + b), the add in T as torch's
template <typename T>
__global__ void bias_act_kernel(int op, int64_t n, int64_t cols, T *out, const T *b)
{
    GK_FOR_EACH(i, n) {
        T v = out[i] + b[i % cols];
        if (op == GK_ACT_RELU)
            out[i] = v <= 0 ? (T)0 : v;
        else if (op == GK_ACT_SIGMOID)
            out[i] = (T)(1.0 / (1.0 + exp(-(double)v)));
        else
            out[i] = (T)tanh((double)v);
    }
}

// gx, x, y (it.shape, any strides), gout (1) -> gx = beta * gx + (sigmoid(x) - y) * gout / numel
template <typename T>
__global__ void bce_backward_kernel(gk_iter it, char *gx, const char *x, const char *y,
                                    const char *gout, double numel, double beta)
{
    const double alpha = (double)*(const T *)gout / numel;
    GK_FOR_EACH(i, it.n) {
        int64_t off[3];
        gk_offsets<3>(it, i, off);
        T *g = (T *)(gx + off[0]);
        double v = (1.0 / (1.0 + exp(-(double)*(const T *)(x + off[1]))) -
                    (double)*(const T *)(y + off[2])) * alpha;
        *g = (T)(beta == 0 ? v : beta * (double)*g + v);
    }
}

/* The launchers (GK_DISPATCH: one template instance per dtype). */
extern "C" cudaError_t gk_act(cudaStream_t s, enum gk_dtype dt, enum gk_act op,
                              struct gk_iter it, char *out, const char *a)
{
    GK_DISPATCH(act_kernel, it.n, (int)op, it, out, a);
}

extern "C" cudaError_t gk_act_backward(cudaStream_t s, enum gk_dtype dt, enum gk_act op,
                                       struct gk_iter it, char *gin, const char *v,
                                       const char *gout, double beta)
{
    GK_DISPATCH(act_backward_kernel, it.n, (int)op, it, gin, v, gout, beta);
}

extern "C" cudaError_t gk_bias_act(cudaStream_t s, enum gk_dtype dt, enum gk_act op,
                                   int64_t rows, int64_t cols, char *out, const char *b)
{
    int64_t n = rows * cols;
    if (n == 0)
        return cudaSuccess;
    if (dt == GK_F64)
        GK_LAUNCH(bias_act_kernel<double>, gk_blocks(n), GK_THREADS, s, (int)op, n, cols,
                  (double *)out, (const double *)b);
    else
        GK_LAUNCH(bias_act_kernel<float>, gk_blocks(n), GK_THREADS, s, (int)op, n, cols,
                  (float *)out, (const float *)b);
    return cudaGetLastError();
}

extern "C" cudaError_t gk_bce_backward(cudaStream_t s, enum gk_dtype dt, struct gk_iter it,
                                       char *gx, const char *x, const char *y, const char *gout,
                                       double numel, double beta)
{
    GK_DISPATCH(bce_backward_kernel, it.n, it, gx, x, y, gout, numel, beta);
}
