/* kernels_rows.cu — softmax and cross entropy along the rows of (N, C) views, forward and backward; the classification losses' label check. */
#include "kernels_common.cuh"

/*
 * Each row's max and sums are reduced by a "team": one thread per row when rows are
 * short (the CPU's loops over j in index order, so the same sums), or the block's
 * GK_THREADS threads per row when they are long (a strided partial per thread, then the
 * fixed tree of block_sum). Either way the order is fixed: the same inputs give the same
 * bits every run, with no atomics. Arithmetic is in double as in core/be_cpu_nn_loops.h;
 * exp and log are CUDA's, within an ulp or two of glibc's.
 */

#define ROW_SERIAL_MAX 64   /* rows up to this long: one thread per row */

struct team {
    bool block;     /* the whole block works on one row (a GK_LAUNCH_SYNC kernel) */
    double *sh;     /* the block's shared scratch, GK_THREADS doubles */
};

__device__ __forceinline__ int64_t team_first(const team &t)
{
    return t.block ? (int64_t)threadIdx.x : 0;
}

__device__ __forceinline__ int64_t team_step(const team &t)
{
    return t.block ? GK_THREADS : 1;
}

__device__ __forceinline__ double team_sum(const team &t, double v)
{
    return t.block ? block_sum(v, t.sh) : v;
}

__device__ __forceinline__ double team_max(const team &t, double v)
{
    return t.block ? block_max(v, t.sh) : v;
}

/* Is this team member the one that writes a row's single result? */
__device__ __forceinline__ bool team_leader(const team &t)
{
    return !t.block || threadIdx.x == 0;
}

/* max_j x_j and sum_j exp(x_j - max) of row x (cols elements, element stride xs). */
template <typename T>
__device__ __forceinline__ void row_max_sum(const team &t, const T *x, int64_t xs, int64_t cols,
                                            double *mx_out, double *sum_out)
{
    double mx = -INFINITY, sum = 0;
    for (int64_t j = team_first(t); j < cols; j += team_step(t))
        mx = fmax(mx, (double)x[j * xs]);
    mx = team_max(t, mx);
    for (int64_t j = team_first(t); j < cols; j += team_step(t))
        sum += exp((double)x[j * xs] - mx);
    *mx_out = mx;
    *sum_out = team_sum(t, sum);
}

// a (n, cols), any strides -> out (n, cols) contiguous: softmax of row i
template <typename T>
__device__ void softmax_row(const team &t, const gk_rows &r, int64_t i, const T *a, T *out)
{
    const T *x = a + i * r.ar;
    T *y = out + i * r.cols;
    double mx, sum;
    row_max_sum(t, x, r.ac, r.cols, &mx, &sum);
    for (int64_t j = team_first(t); j < r.cols; j += team_step(t))
        y[j] = (T)(exp((double)x[j * r.ac] - mx) / sum);
}

// y, g (n, cols), any strides -> gin (n, cols) contiguous, row i
template <typename T>
__device__ void softmax_backward_row(const team &t, const gk_rows &r, int64_t i, const T *ys,
                                     const T *gs, T *gin, double beta)
{
    const T *y = ys + i * r.ar, *g = gs + i * r.gr;
    T *o = gin + i * r.cols;
    double s = 0;
    for (int64_t j = team_first(t); j < r.cols; j += team_step(t))
        s += (double)g[j * r.gc] * (double)y[j * r.ac];
    s = team_sum(t, s);
    for (int64_t j = team_first(t); j < r.cols; j += team_step(t)) {
        double gv = g[j * r.gc], yv = y[j * r.ac];
        double v = yv * (gv - s);
        o[j] = (T)(beta == 0 ? v : beta * (double)o[j] + v);
    }
}

/* Is l a class index in [0, classes), or a BCE target in [0, 1] (classes GK_LABEL_UNIT)?
 * The CPU's tests (core/be_cpu_nn_loops.h); NaN fails both. */
__device__ __forceinline__ bool label_ok(double l, int64_t classes)
{
    if (classes == GK_LABEL_UNIT)
        return l >= 0 && l <= 1;
    return l >= 0 && l < (double)classes && l == floor(l);
}

/* Row i's label as a class index, or -1 when it is not an integer in [0, cols). */
template <typename T>
__device__ __forceinline__ int64_t class_of(const gk_rows &r, const T *labels, int64_t i)
{
    double l = (double)labels[i * r.ls];
    return label_ok(l, r.cols) ? (int64_t)l : -1;
}

// logits (n, cols), labels (n) -> loss (n): row i's cross entropy, or 0 for a bad label
template <typename T>
__device__ void xent_row(const team &t, const gk_rows &r, int64_t i, const T *logits,
                         const T *labels, double *loss)
{
    int64_t l = class_of(r, labels, i);   /* the same for every member: no divergent tree */
    if (l < 0) {   /* gk_check_labels names it */
        if (team_leader(t))
            loss[i] = 0;
        return;
    }
    const T *x = logits + i * r.ar;
    double mx, sum;
    row_max_sum(t, x, r.ac, r.cols, &mx, &sum);
    if (team_leader(t))
        loss[i] = mx + log(sum) - (double)x[l * r.ac];
}

// logits (n, cols), labels (n), gout (1) -> g (n, cols) contiguous, row i
template <typename T>
__device__ void xent_backward_row(const team &t, const gk_rows &r, int64_t i, const T *logits,
                                  const T *labels, double scale, T *g, double beta)
{
    const T *x = logits + i * r.ar;
    T *o = g + i * r.cols;
    int64_t l = class_of(r, labels, i);   /* validated by the forward; -1 adds no one-hot */
    double mx, sum;
    row_max_sum(t, x, r.ac, r.cols, &mx, &sum);
    for (int64_t j = team_first(t); j < r.cols; j += team_step(t)) {
        double v = (exp((double)x[j * r.ac] - mx) / sum - (j == l ? 1.0 : 0.0)) * scale;
        o[j] = (T)(beta == 0 ? v : beta * (double)o[j] + v);
    }
}

/*
 * One kernel per row function and team: ROW(i) is the call for row i with team tm.
 * Serial kernels put a thread on each row; block kernels a block on each row, rows
 * strided over the grid (every thread of a block runs the same rows, as the tree needs).
 */
#define ROW_KERNELS(name, params, ROW)                                                     \
    template <typename T>                                                                  \
    __global__ void name##_serial params                                                   \
    {                                                                                      \
        const team tm = {false, nullptr};                                                  \
        GK_FOR_EACH(i, r.n) {                                                              \
            ROW;                                                                           \
        }                                                                                  \
    }                                                                                      \
    template <typename T>                                                                  \
    GK_BLOCK_KERNEL name##_block params                                                    \
    {                                                                                      \
        __shared__ double sh[GK_THREADS];                                                  \
        const team tm = {true, sh};                                                        \
        for (int64_t i = blockIdx.x; i < r.n; i += gridDim.x) {                            \
            ROW;                                                                           \
        }                                                                                  \
    }

ROW_KERNELS(softmax, (gk_rows r, const T *a, T *out), softmax_row<T>(tm, r, i, a, out))
ROW_KERNELS(softmax_backward, (gk_rows r, const T *y, const T *g, T *gin, double beta),
            softmax_backward_row<T>(tm, r, i, y, g, gin, beta))
ROW_KERNELS(xent, (gk_rows r, const T *logits, const T *labels, double *loss),
            xent_row<T>(tm, r, i, logits, labels, loss))
ROW_KERNELS(xent_backward, (gk_rows r, const T *logits, const T *labels, const T *gout, T *g,
                            double beta),
            xent_backward_row<T>(tm, r, i, logits, labels, (double)*gout / (double)r.n, g, beta))

/* Launches name's serial or block kernel for dtype T with the row arguments ARGS. */
#define LAUNCH_ROWS(T, name, ...)                                                          \
    do {                                                                                   \
        if (r.cols <= ROW_SERIAL_MAX) {                                                    \
            auto k = name##_serial<T>;   /* an alias: the macro cannot take "<T>" */       \
            GK_LAUNCH(k, gk_blocks(r.n), GK_THREADS, s, r, __VA_ARGS__);                   \
        } else {                                                                           \
            auto k = name##_block<T>;                                                      \
            unsigned blocks = (unsigned)(r.n < GK_MAX_BLOCKS ? r.n : GK_MAX_BLOCKS);       \
            GK_LAUNCH_SYNC(k, blocks, GK_THREADS, s, r, __VA_ARGS__);                      \
        }                                                                                  \
    } while (0)

#define F64(p) ((const double *)(p))
#define F32(p) ((const float *)(p))

extern "C" cudaError_t gk_softmax(cudaStream_t s, enum gk_dtype dt, struct gk_rows r,
                                  const char *a, char *out)
{
    if (r.n == 0 || r.cols == 0)
        return cudaSuccess;
    if (dt == GK_F64)
        LAUNCH_ROWS(double, softmax, F64(a), (double *)out);
    else
        LAUNCH_ROWS(float, softmax, F32(a), (float *)out);
    return cudaGetLastError();
}

extern "C" cudaError_t gk_softmax_backward(cudaStream_t s, enum gk_dtype dt, struct gk_rows r,
                                           const char *y, const char *gout, char *gin,
                                           double beta)
{
    if (r.n == 0 || r.cols == 0)
        return cudaSuccess;
    if (dt == GK_F64)
        LAUNCH_ROWS(double, softmax_backward, F64(y), F64(gout), (double *)gin, beta);
    else
        LAUNCH_ROWS(float, softmax_backward, F32(y), F32(gout), (float *)gin, beta);
    return cudaGetLastError();
}

extern "C" cudaError_t gk_xent_rows(cudaStream_t s, enum gk_dtype dt, struct gk_rows r,
                                    const char *logits, const char *labels, double *loss)
{
    if (r.n == 0)
        return cudaSuccess;
    if (dt == GK_F64)
        LAUNCH_ROWS(double, xent, F64(logits), F64(labels), loss);
    else
        LAUNCH_ROWS(float, xent, F32(logits), F32(labels), loss);
    return cudaGetLastError();
}

extern "C" cudaError_t gk_xent_backward(cudaStream_t s, enum gk_dtype dt, struct gk_rows r,
                                        const char *logits, const char *labels,
                                        const char *gout, char *g, double beta)
{
    if (r.n == 0 || r.cols == 0)
        return cudaSuccess;
    if (dt == GK_F64)
        LAUNCH_ROWS(double, xent_backward, F64(logits), F64(labels), F64(gout), (double *)g,
                    beta);
    else
        LAUNCH_ROWS(float, xent_backward, F32(logits), F32(labels), F32(gout), (float *)g,
                    beta);
    return cudaGetLastError();
}

/* ---- the label check ---- */

template <typename T>
__device__ __forceinline__ double label_at(const gk_iter &it, const char *labels, int64_t i)
{
    int64_t off;
    gk_offsets<1>(it, i, &off);
    return (double)*(const T *)(labels + off);
}

/* Each thread's first bad index (its later ones are larger) into rec->first. The minimum
 * of integers is the same in any order, so the atomic leaves no trace in the result. */
template <typename T>
__global__ void first_bad_label(gk_iter it, const char *labels, int64_t classes,
                                gk_label_check *rec)
{
    GK_FOR_EACH(i, it.n) {
        if (!label_ok(label_at<T>(it, labels, i), classes)) {
            atomicMin(&rec->first, (unsigned long long)i);
            return;
        }
    }
}

/* One thread: records this check's first bad label unless an earlier check's is held, and
 * leaves rec->first clear for the next check. */
template <typename T>
__global__ void record_bad_label(gk_iter it, const char *labels, int64_t classes,
                                 gk_label_check *rec)
{
    unsigned long long i = rec->first;
    if (i == GK_NO_BAD_LABEL)
        return;
    rec->first = GK_NO_BAD_LABEL;
    if (rec->found != 0)
        return;
    rec->found = 1;
    rec->row = (double)i;
    rec->value = label_at<T>(it, labels, (int64_t)i);
    rec->classes = (double)classes;
}

extern "C" cudaError_t gk_check_labels(cudaStream_t s, enum gk_dtype dt, struct gk_iter it,
                                       const char *labels, int64_t classes,
                                       struct gk_label_check *rec)
{
    if (it.n == 0)
        return cudaSuccess;
    if (dt == GK_F64) {
        GK_LAUNCH(first_bad_label<double>, gk_blocks(it.n), GK_THREADS, s, it, labels, classes, rec);
        GK_LAUNCH(record_bad_label<double>, 1, 1, s, it, labels, classes, rec);
    } else {
        GK_LAUNCH(first_bad_label<float>, gk_blocks(it.n), GK_THREADS, s, it, labels, classes, rec);
        GK_LAUNCH(record_bad_label<float>, 1, 1, s, it, labels, classes, rec);
    }
    return cudaGetLastError();
}
