/* kernels_optim.cu — fused optimizer updates: torch.optim.SGD and Adam/AdamW with the clip coefficient folded in, one pass over flat buffers. */
#include "kernels_common.cuh"

/*
 * Arithmetic in T, statement by statement as core/be_cpu_loops.h (sgd_loop,
 * adam_loop), with every constant the CPU derives in double (bias corrections,
 * step size) computed once on the host; built with --fmad=false, the update is
 * the CPU's bit for bit.
 */

/* The clip coefficient as T, and whether it applies (core's be_clip_coef: IEEE sqrt and
 * division, so the same bits). Every thread reads the one device double. */
template <typename T>
__device__ __forceinline__ T clip_factor(const gk_clip &c, bool *on)
{
    *on = false;
    if (!c.sumsq || !(c.max_norm > 0))
        return (T)1;
    double coef = c.max_norm / (sqrt(*c.sumsq) + 1e-6);
    *on = !(coef >= 1.0);
    return (T)coef;
}

// p (n), g (n), buf (n or NULL), clip.sumsq (1) -> p, buf updated in place
template <typename T>
__global__ void sgd_kernel(int64_t n, T *p, const T *g, T *buf, gk_sgd_args a)
{
    const T lr = (T)a.lr, m = (T)a.momentum, wd = (T)a.weight_decay;
    bool clip;
    const T cv = clip_factor<T>(a.clip, &clip);
    GK_FOR_EACH(i, n) {
        T d = g[i];
        if (clip)   /* clip_grad_norm_'s g.mul_(coef) */
            d = (T)(d * cv);
        if (wd != 0)
            d = d + wd * p[i];
        if (buf) {
            buf[i] = a.first ? d : m * buf[i] + d;
            d = a.nesterov ? d + m * buf[i] : buf[i];
        }
        p[i] = p[i] + (-lr) * d;
    }
}

// p (n), g (n), m (n), v (n), clip.sumsq (1) -> p, m, v updated in place
template <typename T>
__global__ void adam_kernel(int64_t n, T *p, const T *g, T *m, T *v, gk_adam_args a)
{
    const T step_size = (T)a.step_size, bc2_sqrt = (T)a.bc2_sqrt, eps = (T)a.eps;
    const T b1 = (T)a.b1, b2 = (T)a.b2, one_b1 = (T)a.one_b1, one_b2 = (T)a.one_b2,
            wd = (T)a.wd, shrink = (T)a.shrink;
    bool clip;
    const T cv = clip_factor<T>(a.clip, &clip);
    GK_FOR_EACH(i, n) {
        T d = g[i], pi = p[i];
        if (clip)
            d = (T)(d * cv);
        if (a.decoupled)
            pi = pi * shrink;
        else if (wd != 0)
            d = d + wd * pi;
        T mi = m[i] * b1 + one_b1 * d;
        T vi = v[i] * b2 + one_b2 * d * d;
        T denom = (T)sqrt((double)vi) / bc2_sqrt + eps;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi + (-step_size) * mi / denom;
    }
}

extern "C" cudaError_t gk_sgd(cudaStream_t s, enum gk_dtype dt, int64_t n, char *p,
                              const char *g, char *buf, struct gk_sgd_args a)
{
    if (n == 0)
        return cudaSuccess;
    if (dt == GK_F64)
        GK_LAUNCH(sgd_kernel<double>, gk_blocks(n), GK_THREADS, s, n, (double *)p,
                  (const double *)g, (double *)buf, a);
    else
        GK_LAUNCH(sgd_kernel<float>, gk_blocks(n), GK_THREADS, s, n, (float *)p, (const float *)g,
                  (float *)buf, a);
    return cudaGetLastError();
}

extern "C" cudaError_t gk_adam(cudaStream_t s, enum gk_dtype dt, int64_t n, char *p,
                               const char *g, char *m, char *v, struct gk_adam_args a)
{
    if (n == 0)
        return cudaSuccess;
    if (dt == GK_F64)
        GK_LAUNCH(adam_kernel<double>, gk_blocks(n), GK_THREADS, s, n, (double *)p,
                  (const double *)g, (double *)m, (double *)v, a);
    else
        GK_LAUNCH(adam_kernel<float>, gk_blocks(n), GK_THREADS, s, n, (float *)p, (const float *)g,
                  (float *)m, (float *)v, a);
    return cudaGetLastError();
}
