/* be_cpu.c — the CPU backend: host memory, BLAS matmul and strided loops for every kernel. */
#include "be_cpu_impl.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"

#define NOP BE_CPU_NOP

static inline double sq(double v)
{
    return v * v;
}

#define T double
#define SFX(name) name##_f64
#include "be_cpu_loops.h"
#undef T
#undef SFX
#define T float
#define SFX(name) name##_f32
#include "be_cpu_loops.h"
#undef T
#undef SFX

/* Up to NOP operands walked over one shape: size-1 dims dropped, mergeable dims merged, so a
 * contiguous or batch[:, k] operand becomes one strided run. */
struct iter {
    int nd, nop;
    int64_t shape[TENSOR_MAX_DIMS];
    int64_t st[NOP][TENSOR_MAX_DIMS];
};

typedef be_cpu_inner_fn inner_fn;

static void iter_init(struct iter *it, int nd, const int64_t *shape, int nop,
                      const int64_t *const *strides)
{
    int k = 0;
    it->nop = nop;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1)
            continue;
        bool merge = k > 0;
        for (int o = 0; merge && o < nop; o++)
            merge = it->st[o][k - 1] == strides[o][d] * shape[d];
        if (merge) {
            it->shape[k - 1] *= shape[d];
            for (int o = 0; o < nop; o++)
                it->st[o][k - 1] = strides[o][d];
            continue;
        }
        it->shape[k] = shape[d];
        for (int o = 0; o < nop; o++)
            it->st[o][k] = strides[o][d];
        k++;
    }
    it->nd = k;
}

static void iter_run(const struct iter *it, char *const *base, inner_fn fn, const void *ctx)
{
    char *p[NOP] = {0};
    int64_t ist[NOP] = {0}, idx[TENSOR_MAX_DIMS] = {0}, outer = 1;
    for (int o = 0; o < it->nop; o++)
        p[o] = base[o];
    if (it->nd == 0) {
        fn(1, p, ist, ctx);
        return;
    }
    for (int d = 0; d < it->nd; d++)
        if (it->shape[d] == 0)
            return;
    int in = it->nd - 1;
    for (int o = 0; o < it->nop; o++)
        ist[o] = it->st[o][in];
    for (int d = 0; d < in; d++)
        outer *= it->shape[d];
    for (int64_t i = 0; i < outer; i++) {
        fn(it->shape[in], p, ist, ctx);
        for (int d = in - 1; d >= 0; d--) {
            for (int o = 0; o < it->nop; o++)
                p[o] += it->st[o][d];
            if (++idx[d] < it->shape[d])
                break;
            for (int o = 0; o < it->nop; o++)
                p[o] -= it->st[o][d] * it->shape[d];
            idx[d] = 0;
        }
    }
}

void be_cpu_run(inner_fn f64, inner_fn f32, const struct tensor *const *ops, int nop,
                const void *ctx)
{
    struct iter it;
    const int64_t *st[NOP];
    char *base[NOP];
    for (int o = 0; o < nop; o++) {
        st[o] = ops[o]->stride;
        base[o] = ops[o]->data;
    }
    iter_init(&it, ops[0]->ndim, ops[0]->shape, nop, st);
    iter_run(&it, base, ops[0]->dtype == TENSOR_F64 ? f64 : f32, ctx);
}


/* ---- memory ---- */

static void *cpu_alloc(const struct backend *be, size_t bytes, struct err *e)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p)
        err_set(e, ERR_NOMEM, "cpu: cannot allocate %zu bytes", bytes);
    return p;
}

static void cpu_free(const struct backend *be, void *p)
{
    free(p);
}

static int cpu_memset0(const struct backend *be, void *p, size_t bytes, struct err *e)
{
    memset(p, 0, bytes);
    return 0;
}

static int cpu_copy(const struct backend *be, void *dst, const void *src, size_t bytes,
                    struct err *e)
{
    if (bytes)
        memmove(dst, src, bytes);
    return 0;
}

/* ---- elementwise and reductions ---- */

static int k_unary(const struct backend *be, enum be_unop op, const struct tensor *a,
                   struct tensor *out, double alpha, double beta, struct err *e)
{
    struct lin_ctx c = {.op = op, .alpha = alpha, .beta = beta};
    const struct tensor *ops[] = {out, a};
    be_cpu_run(unary_inner_f64, unary_inner_f32, ops, 2, &c);
    return 0;
}

static int k_binary(const struct backend *be, enum be_binop op, const struct tensor *a,
                    const struct tensor *b, struct tensor *out, double alpha, double beta,
                    struct err *e)
{
    struct lin_ctx c = {.op = op, .alpha = alpha, .beta = beta};
    const struct tensor *ops[] = {out, a, b};
    be_cpu_run(binary_inner_f64, binary_inner_f32, ops, 3, &c);
    return 0;
}

static int k_reduce(const struct backend *be, const struct tensor *src, struct tensor *dst,
                    double alpha, double beta, double div, struct err *e)
{
    struct lin_ctx c = {.alpha = alpha, .beta = beta, .div = div};
    struct tensor kept = *src;   /* src with the reduced dims set to size 1 */
    for (int d = 0; d < src->ndim; d++) {
        if (dst->shape[d] == src->shape[d] || src->shape[d] == 1)
            continue;
        kept.shape[d] = 1;
        if (c.rnd > 0 && c.rstride[c.rnd - 1] == src->stride[d] * src->shape[d]) {
            c.rshape[c.rnd - 1] *= src->shape[d];
            c.rstride[c.rnd - 1] = src->stride[d];
        } else {
            c.rshape[c.rnd] = src->shape[d];
            c.rstride[c.rnd] = src->stride[d];
            c.rnd++;
        }
    }
    const struct tensor *ops[] = {dst, &kept};
    if (c.rnd == 0)
        be_cpu_run(axpby_inner_f64, axpby_inner_f32, ops, 2, &c);
    else
        be_cpu_run(reduce_inner_f64, reduce_inner_f32, ops, 2, &c);
    return 0;
}

static int k_fill(const struct backend *be, struct tensor *t, double v, struct err *e)
{
    struct lin_ctx c = {.op = 0, .alpha = v};
    const struct tensor *ops[] = {t};
    be_cpu_run(fill_inner_f64, fill_inner_f32, ops, 1, &c);
    return 0;
}

static int k_scale(const struct backend *be, struct tensor *t, double alpha, struct err *e)
{
    struct lin_ctx c = {.op = 1, .alpha = alpha};
    const struct tensor *ops[] = {t};
    be_cpu_run(fill_inner_f64, fill_inner_f32, ops, 1, &c);
    return 0;
}

static int k_sumsq(const struct backend *be, const struct tensor *t, double *out, struct err *e)
{
    struct lin_ctx c = {0};
    const struct tensor *ops[] = {t};
    be_cpu_run(sumsq_inner_f64, sumsq_inner_f32, ops, 1, &c);
    *out = c.acc;
    return 0;
}

double be_clip_coef(double sumsq, double max_norm, bool *on)
{
    double coef = max_norm / (sqrt(sumsq) + 1e-6);
    *on = max_norm > 0 && !(coef >= 1.0);
    return coef;
}

static void store_scalar(struct tensor *t, double v)
{
    if (t->dtype == TENSOR_F64)
        *(double *)t->data = v;
    else
        *(float *)t->data = (float)v;
}

static double load_scalar(const struct tensor *t)
{
    return t->dtype == TENSOR_F64 ? *(const double *)t->data : *(const float *)t->data;
}

static int k_mse(const struct backend *be, const struct tensor *pred, const struct tensor *target,
                 struct tensor *out, struct err *e)
{
    struct lin_ctx c = {0};
    const struct tensor *ops[] = {pred, target};
    be_cpu_run(sqdiff_inner_f64, sqdiff_inner_f32, ops, 2, &c);
    store_scalar(out, c.acc / (double)tensor_numel(pred));
    return 0;
}

static int k_mse_backward(const struct backend *be, const struct tensor *pred,
                          const struct tensor *target, const struct tensor *gout,
                          struct tensor *gpred, double beta_p, struct tensor *gtarget,
                          double beta_t, struct err *e)
{
    struct lin_ctx c = {.alpha = load_scalar(gout), .div = 2.0 / (double)tensor_numel(pred)};
    if (gpred) {
        const struct tensor *ops[] = {gpred, pred, target};
        c.beta = beta_p;
        be_cpu_run(mse_bw_inner_f64, mse_bw_inner_f32, ops, 3, &c);
    }
    if (gtarget) {
        const struct tensor *ops[] = {gtarget, pred, target};
        c.op = 1;
        c.beta = beta_t;
        be_cpu_run(mse_bw_inner_f64, mse_bw_inner_f32, ops, 3, &c);
    }
    return 0;
}

static int k_sgd(const struct backend *be, struct tensor *p, const struct tensor *g,
                 struct tensor *buf, const struct be_sgd_args *a, struct err *e)
{
    int64_t n = tensor_numel(p);
    if (p->dtype == TENSOR_F64)
        sgd_loop_f64(n, (double *)p->data, (const double *)g->data,
                     buf ? (double *)buf->data : NULL, a);
    else
        sgd_loop_f32(n, (float *)p->data, (const float *)g->data,
                     buf ? (float *)buf->data : NULL, a);
    return 0;
}

static int k_adam(const struct backend *be, struct tensor *p, const struct tensor *g,
                  struct tensor *m, struct tensor *v, const struct be_adam_args *a,
                  struct err *e)
{
    int64_t n = tensor_numel(p);
    if (p->dtype == TENSOR_F64)
        adam_loop_f64(n, (double *)p->data, (const double *)g->data, (double *)m->data,
                      (double *)v->data, a);
    else
        adam_loop_f32(n, (float *)p->data, (const float *)g->data, (float *)m->data,
                      (float *)v->data, a);
    return 0;
}

/* ---- matmul ---- */


/* A contiguous host copy of t, for layouts BLAS cannot express (broadcast, 2-D strided). */
static struct tensor *contig_copy(const struct tensor *t, struct err *e)
{
    struct tensor *c = tensor_new_uninit(t->be, t->dtype, t->ndim, t->shape, e);
    if (c)
        k_reduce(t->be, t, c, 1, 0, 1, e);
    return c;
}

static int k_matmul(const struct backend *be, const struct tensor *a, const struct tensor *b,
                    struct tensor *out, double beta, struct err *e)
{
    int64_t M = a->shape[0], K = a->shape[1], N = b->shape[1];
    struct tensor *ca = NULL, *cb = NULL, *co = NULL;
    bool ta = false, tb = false, to = false;
    int lda = 1, ldb = 1, ldc = 1, rc = 0;
    if (M == 0 || N == 0)
        return 0;
    if (K == 0)
        return beta == 0 ? k_fill(be, out, 0, e) : k_scale(be, out, beta, e);
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return err_set(e, ERR_INVALID_ARG, "matmul: dimension over %d", INT_MAX);
    if (!tensor_blas_layout(a, &ta, &lda)) {
        if (!(a = ca = contig_copy(a, e)))
            return e ? e->code : ERR_NOMEM;
        tensor_blas_layout(a, &ta, &lda);
    }
    if (!tensor_blas_layout(b, &tb, &ldb)) {
        if (!(b = cb = contig_copy(b, e))) {
            rc = e ? e->code : ERR_NOMEM;
            goto done;
        }
        tensor_blas_layout(b, &tb, &ldb);
    }
    struct tensor *c = out;
    if (!tensor_blas_layout(out, &to, &ldc) || to) {
        if (!(c = co = beta == 0 ? tensor_new_uninit(be, out->dtype, 2, out->shape, e)
                                 : contig_copy(out, e))) {
            rc = e ? e->code : ERR_NOMEM;
            goto done;
        }
        tensor_blas_layout(c, &to, &ldc);
    }
    enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
    int64_t es = (int64_t)tensor_dtype_size(a->dtype);
    int64_t incx = tb ? ldb : b->stride[0] / es, incy = c->stride[0] / es;
    if (K == 1)
        incx = tb ? ldb : 1;
    if (M == 1)
        incy = 1;
    /* A matrix-vector product (the linear model's X @ w) goes through gemv. */
    bool gemv = N == 1 && incx > 0 && incy > 0;
    if (a->dtype == TENSOR_F64) {
        if (gemv)
            cblas_dgemv(CblasRowMajor, opa, ta ? (int)K : (int)M, ta ? (int)M : (int)K, 1.0,
                        (const double *)a->data, lda, (const double *)b->data, (int)incx, beta,
                        (double *)c->data, (int)incy);
        else
            cblas_dgemm(CblasRowMajor, opa, opb, (int)M, (int)N, (int)K, 1.0,
                        (const double *)a->data, lda, (const double *)b->data, ldb, beta,
                        (double *)c->data, ldc);
    } else {
        if (gemv)
            cblas_sgemv(CblasRowMajor, opa, ta ? (int)K : (int)M, ta ? (int)M : (int)K, 1.0f,
                        (const float *)a->data, lda, (const float *)b->data, (int)incx,
                        (float)beta, (float *)c->data, (int)incy);
        else
            cblas_sgemm(CblasRowMajor, opa, opb, (int)M, (int)N, (int)K, 1.0f,
                        (const float *)a->data, lda, (const float *)b->data, ldb, (float)beta,
                        (float *)c->data, ldc);
    }
    if (co)
        k_reduce(be, co, out, 1, 0, 1, e);
done:
    tensor_free(ca);
    tensor_free(cb);
    tensor_free(co);
    return rc;
}

static bool k_supports(const struct backend *be, enum be_op op, enum tensor_dtype dt)
{
    return dt == TENSOR_F32 || dt == TENSOR_F64;
}

static const struct be_kernels cpu_kernels = {
    .supports = k_supports,
    .matmul = k_matmul,
    .unary = k_unary,
    .binary = k_binary,
    .reduce = k_reduce,
    .fill = k_fill,
    .scale = k_scale,
    .sumsq = k_sumsq,
    .mse = k_mse,
    .mse_backward = k_mse_backward,
    .sgd = k_sgd,
    .adam = k_adam,
    .act = be_cpu_act,
    .act_backward = be_cpu_act_backward,
    .softmax = be_cpu_softmax,
    .softmax_backward = be_cpu_softmax_backward,
    .xent = be_cpu_xent,
    .xent_backward = be_cpu_xent_backward,
    .bce_logits = be_cpu_bce_logits,
    .bce_logits_backward = be_cpu_bce_logits_backward,
    .linear_mse = be_cpu_linear_mse,
    .bias_act = be_cpu_bias_act,
    .sumsq_dev = k_sumsq,   /* the CPU's memory is the host's */
};

static const struct backend cpu_backend = {
    .name = "cpu",
    .ctx = NULL,
    .host_memory = true,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset0 = cpu_memset0,
    .to_host = cpu_copy,
    .from_host = cpu_copy,
    .k = &cpu_kernels,
    .host_alloc = be_cpu_host_alloc,
    .host_free = be_cpu_host_free,
    .event_new = be_cpu_event_new,
    .event_free = be_cpu_event_free,
    .upload_async = be_cpu_upload,
    .upload_start = be_cpu_upload,
    .compute_wait = be_cpu_event_op,
    .compute_record = be_cpu_event_op,
    .event_query = be_cpu_event_query,
    .synchronize = be_cpu_synchronize,
    .copy_on_device = be_cpu_copy_on_device,
    .memory_stats = be_cpu_memory_stats,
    .empty_cache = be_cpu_synchronize,   /* nothing is cached */
    .free_memory = be_cpu_free_memory,
    .alloc_spare = be_cpu_alloc_spare,
    .alloc_size = be_cpu_alloc_size,
    .set_reclaim = be_cpu_set_reclaim,
    .native_stream = be_cpu_native_stream,
    .side_stream = be_cpu_native_stream,
    .side_wait = be_cpu_event_op,
    .side_record = be_cpu_event_op,
};

const struct backend *be_cpu(void)
{
    return &cpu_backend;
}

static int cpu_create(int index, const struct backend **out, struct err *e)
{
    *out = NULL;
    if (index != 0)
        return err_set(e, ERR_DEVICE, "cpu:%d: the CPU backend is one device, cpu:0", index);
    *out = &cpu_backend;
    return 0;
}

static void cpu_destroy(const struct backend *be)
{
}

static const struct backend_factory cpu_factory = {.kind = "cpu", .create = cpu_create, .destroy = cpu_destroy};

const struct backend_factory *be_cpu_factory(void)
{
    return &cpu_factory;
}

const struct be_kernels *be_cpu_kernels(void)
{
    return &cpu_kernels;
}
