/* be_cuda.c — the CUDA backend: creation, memory, streams and events, and every kernel entry but matmul. */
#include "be_cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "be_cuda_impl.h"
#include "cuda_check.h"

/* The backend's events besides the caller's: internal ordering between its two streams. */
struct cuda_events {
    cudaEvent_t ordered;    /* compute -> copy: an upload waits for queued compute */
    cudaEvent_t uploaded;   /* copy -> compute: kernels wait for the upload */
};

struct cuda_backend {
    struct cuda_ctx c;      /* first, so the ctx pointer is the backend's */
    struct cuda_events ev;
};

struct gpu_event {
    cudaEvent_t ev;
    int device;
    bool on_compute;        /* last recorded by be_cuda_compute_record: an upload may wait for it alone */
};

static const struct be_kernels cuda_kernels;

static enum gk_dtype gdt(enum tensor_dtype dt)
{
    return dt == TENSOR_F64 ? GK_F64 : GK_F32;
}

/* e's code after a failure that may or may not have filled it. */
static int code_of(const struct err *e, int fallback)
{
    return e && e->code ? e->code : fallback;
}

int cuda_launched(struct err *e, const char *file, int line, const char *what, cudaError_t rc)
{
    return rc == cudaSuccess ? 0 : gpu_cuda_fail(e, file, line, what, rc);
}

int cuda_enter(struct cuda_ctx *c, struct err *e)
{
    int cur = -1;
    CUDA_CHECK(e, cudaGetDevice(&cur));
    if (cur != c->device)
        CUDA_CHECK(e, cudaSetDevice(c->device));
    return 0;
}

void cuda_iter_make(struct gk_iter *it, int nd, const int64_t *shape, int nop,
                    const int64_t *const *strides)
{
    int k = 0;
    memset(it, 0, sizeof *it);
    it->n = 1;
    for (int d = 0; d < nd; d++)
        it->n *= shape[d];
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
        for (int o = 0; o < GK_MAX_OPS; o++)
            it->st[o][k] = o < nop ? strides[o][d] : 0;
        k++;
    }
    if (k == 0) {   /* a single element */
        it->shape[0] = 1;
        for (int o = 0; o < GK_MAX_OPS; o++)
            it->st[o][0] = 0;
        k = 1;
    }
    it->nd = k;
}

/* ---- waits and label checks ---- */

_Static_assert(GK_LABEL_UNIT == BE_LABEL_UNIT, "one code for a BCE target's check");

int cuda_wait(struct cuda_ctx *c, struct err *e)
{
    bool checked = c->check_queued;
    if (checked)   /* rides this wait: the record is copied after the work that wrote it */
        CUDA_CHECK(e, cudaMemcpyAsync(c->check_host, &c->check->found, 4 * sizeof(double),
                                      cudaMemcpyDeviceToHost, c->compute));
    CUDA_CHECK(e, cudaStreamSynchronize(c->compute));
    if (!checked)
        return 0;
    c->check_queued = false;
    const double *h = c->check_host;
    if (h[0] == 0)
        return 0;
    /* Cleared for the next check, behind everything queued so far. */
    CUDA_CHECK(e, cudaMemsetAsync(&c->check->found, 0, sizeof(double), c->compute));
    return be_label_error(e, h[2], (int64_t)h[1], (int64_t)h[3]);
}

int cuda_check_labels(struct cuda_ctx *c, const struct tensor *labels, int64_t classes,
                      struct err *e)
{
    struct gk_iter it;
    const int64_t *st[] = {labels->stride};
    cuda_iter_make(&it, labels->ndim, labels->shape, 1, st);
    int rc = CUDA_LAUNCHED(e, "check_labels", gk_check_labels(c->compute, gdt(labels->dtype), it,
                                                               labels->data, classes, c->check));
    if (!rc)
        c->check_queued = true;
    return rc;
}

/* ---- memory ---- */

static void *cu_alloc(const struct backend *be, size_t bytes, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    return cuda_enter(c, e) ? NULL : gpu_alloc_get(c->alloc, bytes, e);
}

void *be_cuda_alloc_spare(const struct backend *be, size_t bytes, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    return cuda_enter(c, e) ? NULL : gpu_alloc_spare(c->alloc, bytes, e);
}

void be_cuda_set_reclaim(const struct backend *be, bool (*reclaim)(void *ctx), void *ctx)
{
    gpu_alloc_set_reclaim(cuda_ctx_of(be)->alloc, reclaim, ctx);
}

static void cu_free(const struct backend *be, void *p)
{
    gpu_alloc_put(cuda_ctx_of(be)->alloc, p);
}

static int cu_memset0(const struct backend *be, void *p, size_t bytes, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc || bytes == 0)
        return rc;
    CUDA_CHECK(e, cudaMemsetAsync(p, 0, bytes, c->compute));
    return 0;
}

/* Copies run on the compute stream, so they see every kernel queued before them, and
 * wait: the caller may read or free the host side when they return. */
static int cu_to_host(const struct backend *be, void *dst, const void *src, size_t bytes,
                      struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc || bytes == 0)
        return rc;
    CUDA_CHECK(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->compute));
    return cuda_wait(c, e);
}

static int cu_from_host(const struct backend *be, void *dst, const void *src, size_t bytes,
                        struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc || bytes == 0)
        return rc;
    CUDA_CHECK(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->compute));
    return cuda_wait(c, e);
}

/* ---- elementwise ---- */

static int k_unary(const struct backend *be, enum be_unop op, const struct tensor *a,
                   struct tensor *out, double alpha, double beta, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    struct gk_iter it;
    const int64_t *st[] = {out->stride, a->stride};
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    cuda_iter_make(&it, out->ndim, out->shape, 2, st);
    return CUDA_LAUNCHED(e, "unary", gk_unary(c->compute, gdt(out->dtype), (int)op, it,
                                              out->data, a->data, alpha, beta));
}

static int k_binary(const struct backend *be, enum be_binop op, const struct tensor *a,
                    const struct tensor *b, struct tensor *out, double alpha, double beta,
                    struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    struct gk_iter it;
    const int64_t *st[] = {out->stride, a->stride, b->stride};
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    cuda_iter_make(&it, out->ndim, out->shape, 3, st);
    return CUDA_LAUNCHED(e, "binary", gk_binary(c->compute, gdt(out->dtype), (int)op, it,
                                                out->data, a->data, b->data, alpha, beta));
}

static int k_fill_scale(const struct backend *be, struct tensor *t, double v, bool scale,
                        struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    struct gk_iter it;
    const int64_t *st[] = {t->stride};
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    cuda_iter_make(&it, t->ndim, t->shape, 1, st);
    return CUDA_LAUNCHED(e, scale ? "scale" : "fill",
                         gk_fill(c->compute, gdt(t->dtype), it, t->data, v, scale));
}

static int k_fill(const struct backend *be, struct tensor *t, double v, struct err *e)
{
    return k_fill_scale(be, t, v, false, e);
}

static int k_scale(const struct backend *be, struct tensor *t, double alpha, struct err *e)
{
    return k_fill_scale(be, t, alpha, true, e);
}

int cuda_copy_strided(struct cuda_ctx *c, const struct tensor *src, struct tensor *dst,
                      struct err *e)
{
    struct gk_iter it;
    const int64_t *st[] = {dst->stride, src->stride};
    cuda_iter_make(&it, dst->ndim, dst->shape, 2, st);
    return CUDA_LAUNCHED(e, "copy", gk_axpby(c->compute, gdt(dst->dtype), it, dst->data,
                                             src->data, 1, 0, 1));
}

/* ---- reductions ---- */

int cuda_reduce_launch(struct cuda_ctx *c, const struct gk_reduce *r, char *out, const char *a,
                       const char *b, struct err *e)
{
    size_t n = gk_reduce_scratch(r);
    double *scratch = NULL;
    if (n && !(scratch = gpu_alloc_get(c->alloc, n * sizeof(double), e)))
        return code_of(e, ERR_OUT_OF_MEMORY);
    int rc = CUDA_LAUNCHED(e, "reduce", gk_reduce_run(c->compute, r, out, a, b, scratch));
    gpu_alloc_put(c->alloc, scratch);
    return rc;
}

/* The one-output walk of a full reduction. */
static void single_output(struct gk_iter *it)
{
    cuda_iter_make(it, 0, NULL, 0, NULL);
}

static int k_reduce(const struct backend *be, const struct tensor *src, struct tensor *dst,
                    double alpha, double beta, double div, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    /* As core/be_cpu.c: dims where dst has size 1 and src not are summed, merged when
     * adjacent; src seen with those dims dropped ("kept") walks alongside dst. A size-1
     * src dim under a larger dst dim is a broadcast: stride 0. */
    int64_t kept[TENSOR_MAX_DIMS], rshape[TENSOR_MAX_DIMS], rstride[TENSOR_MAX_DIMS];
    int rnd = 0;
    for (int d = 0; d < dst->ndim; d++) {
        kept[d] = src->shape[d] == 1 ? 0 : src->stride[d];
        if (dst->shape[d] == src->shape[d] || src->shape[d] == 1)
            continue;
        kept[d] = 0;
        if (rnd > 0 && rstride[rnd - 1] == src->stride[d] * src->shape[d]) {
            rshape[rnd - 1] *= src->shape[d];
            rstride[rnd - 1] = src->stride[d];
        } else {
            rshape[rnd] = src->shape[d];
            rstride[rnd] = src->stride[d];
            rnd++;
        }
    }
    const int64_t *ost[] = {dst->stride, kept, kept};
    if (rnd == 0) {
        struct gk_iter it;
        cuda_iter_make(&it, dst->ndim, dst->shape, 2, ost);
        return CUDA_LAUNCHED(e, "axpby", gk_axpby(c->compute, gdt(dst->dtype), it, dst->data,
                                                  src->data, alpha, beta, div));
    }
    struct gk_reduce r = {.dt = gdt(dst->dtype), .load = GK_LOAD_X, .alpha = alpha,
                          .beta = beta, .div = div};
    const int64_t *ist[] = {rstride, rstride, rstride};
    cuda_iter_make(&r.outer, dst->ndim, dst->shape, 3, ost);
    cuda_iter_make(&r.inner, rnd, rshape, 3, ist);
    return cuda_reduce_launch(c, &r, dst->data, src->data, src->data, e);
}

/* The sum of squares into out, a device double, without waiting. */
static int k_sumsq_dev(const struct backend *be, const struct tensor *t, double *out,
                       struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    struct gk_reduce r = {.dt = gdt(t->dtype), .load = GK_LOAD_SQ, .out_f64 = true,
                          .alpha = 1, .beta = 0, .div = 1};
    const int64_t *st[] = {t->stride, t->stride, t->stride};
    single_output(&r.outer);
    cuda_iter_make(&r.inner, t->ndim, t->shape, 3, st);
    return cuda_reduce_launch(c, &r, (char *)out, t->data, t->data, e);
}

static int k_sumsq(const struct backend *be, const struct tensor *t, double *out, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    double *d = gpu_alloc_get(c->alloc, sizeof(double), e);
    if (!d)
        return code_of(e, ERR_OUT_OF_MEMORY);
    rc = k_sumsq_dev(be, t, d, e);
    if (!rc)
        rc = cu_to_host(be, out, d, sizeof(double), e);
    gpu_alloc_put(c->alloc, d);
    return rc;
}

static int k_mse(const struct backend *be, const struct tensor *pred, const struct tensor *target,
                 struct tensor *out, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    struct gk_reduce r = {.dt = gdt(pred->dtype), .load = GK_LOAD_SQDIFF, .alpha = 1,
                          .beta = 0, .div = (double)tensor_numel(pred)};
    const int64_t *st[] = {pred->stride, pred->stride, target->stride};
    single_output(&r.outer);
    cuda_iter_make(&r.inner, pred->ndim, pred->shape, 3, st);
    return cuda_reduce_launch(c, &r, out->data, pred->data, target->data, e);
}

static int k_mse_backward(const struct backend *be, const struct tensor *pred,
                          const struct tensor *target, const struct tensor *gout,
                          struct tensor *gpred, double beta_p, struct tensor *gtarget,
                          double beta_t, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    double norm = 2.0 / (double)tensor_numel(pred);
    struct gk_iter it;
    int rc = cuda_enter(c, e);
    if (!rc && gpred) {
        const int64_t *st[] = {gpred->stride, pred->stride, target->stride};
        cuda_iter_make(&it, gpred->ndim, gpred->shape, 3, st);
        rc = CUDA_LAUNCHED(e, "mse_backward",
                           gk_mse_backward(c->compute, gdt(pred->dtype), it, gpred->data,
                                           pred->data, target->data, gout->data, norm, beta_p,
                                           false));
    }
    if (!rc && gtarget) {
        const int64_t *st[] = {gtarget->stride, pred->stride, target->stride};
        cuda_iter_make(&it, gtarget->ndim, gtarget->shape, 3, st);
        rc = CUDA_LAUNCHED(e, "mse_backward",
                           gk_mse_backward(c->compute, gdt(pred->dtype), it, gtarget->data,
                                           pred->data, target->data, gout->data, norm, beta_t,
                                           true));
    }
    return rc;
}

/* ---- optimizers ---- */

static int k_sgd(const struct backend *be, struct tensor *p, const struct tensor *g,
                 struct tensor *buf, const struct be_sgd_args *a, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    struct gk_sgd_args k = {a->lr, a->momentum, a->weight_decay, a->nesterov, a->first,
                            {a->clip.sumsq, a->clip.max_norm}};
    return CUDA_LAUNCHED(e, "sgd", gk_sgd(c->compute, gdt(p->dtype), tensor_numel(p), p->data,
                                          g->data, buf ? buf->data : NULL, k));
}

static int k_adam(const struct backend *be, struct tensor *p, const struct tensor *g,
                  struct tensor *m, struct tensor *v, const struct be_adam_args *a,
                  struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    /* The constants adam_loop derives in double, with the same host libm. */
    const double bc1 = 1 - pow(a->beta1, (double)a->step), bc2 = 1 - pow(a->beta2, (double)a->step);
    struct gk_adam_args k = {
        .step_size = a->lr / bc1,
        .bc2_sqrt = sqrt(bc2),
        .eps = a->eps,
        .b1 = a->beta1,
        .b2 = a->beta2,
        .one_b1 = 1 - a->beta1,
        .one_b2 = 1 - a->beta2,
        .wd = a->weight_decay,
        .shrink = 1 - a->lr * a->weight_decay,
        .decoupled = a->decoupled,
        .clip = {a->clip.sumsq, a->clip.max_norm},
    };
    return CUDA_LAUNCHED(e, "adam", gk_adam(c->compute, gdt(p->dtype), tensor_numel(p), p->data,
                                            g->data, m->data, v->data, k));
}

static bool k_supports(const struct backend *be, enum be_op op, enum tensor_dtype dt)
{
    /* Every op of core's table has a kernel; an op core adds later has none until written. */
    return (dt == TENSOR_F32 || dt == TENSOR_F64) && op >= BE_OP_MATMUL && op <= BE_OP_BIAS_ACT;
}

static const struct be_kernels cuda_kernels = {
    .supports = k_supports,
    .matmul = cuda_k_matmul,
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
    .act = cuda_k_act,
    .act_backward = cuda_k_act_backward,
    .softmax = cuda_k_softmax,
    .softmax_backward = cuda_k_softmax_backward,
    .xent = cuda_k_xent,
    .xent_backward = cuda_k_xent_backward,
    .bce_logits = cuda_k_bce_logits,
    .bce_logits_backward = cuda_k_bce_logits_backward,
    .linear_mse = cuda_k_linear_mse,
    .bias_act = cuda_k_bias_act,
    .sumsq_dev = k_sumsq_dev,
};

/* ---- lifetime ---- */

static void destroy(struct cuda_backend *cb)
{
    struct cuda_ctx *c = &cb->c;
    (void)cuda_enter(c, NULL);
    if (c->compute)
        CUDA_IGNORE(cudaStreamSynchronize(c->compute));
    if (c->copy)
        CUDA_IGNORE(cudaStreamSynchronize(c->copy));
    if (c->side)
        CUDA_IGNORE(cudaStreamSynchronize(c->side));
    cuda_blas_close(c);
    if (cb->ev.ordered)
        CUDA_IGNORE(cudaEventDestroy(cb->ev.ordered));
    if (cb->ev.uploaded)
        CUDA_IGNORE(cudaEventDestroy(cb->ev.uploaded));
    if (c->compute)
        CUDA_IGNORE(cudaStreamDestroy(c->compute));
    if (c->copy)
        CUDA_IGNORE(cudaStreamDestroy(c->copy));
    if (c->side)
        CUDA_IGNORE(cudaStreamDestroy(c->side));
    if (c->check)
        CUDA_IGNORE(cudaFree(c->check));
    if (c->check_host)
        CUDA_IGNORE(cudaFreeHost(c->check_host));
    gpu_alloc_destroy(c->alloc);
    free(cb);
}

static int setup(struct cuda_backend *cb, int device, struct err *e)
{
    struct cuda_ctx *c = &cb->c;
    CUDA_CHECK(e, cudaSetDevice(device));
    CUDA_CHECK(e, cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking));
    CUDA_CHECK(e, cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking));
    CUDA_CHECK(e, cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking));
    CUDA_CHECK(e, cudaEventCreateWithFlags(&cb->ev.ordered, cudaEventDisableTiming));
    CUDA_CHECK(e, cudaEventCreateWithFlags(&cb->ev.uploaded, cudaEventDisableTiming));
    CUDA_CHECK(e, cudaMalloc((void **)&c->check, sizeof *c->check));
    CUDA_CHECK(e, cudaHostAlloc((void **)&c->check_host, 4 * sizeof(double), cudaHostAllocDefault));
    CUDA_CHECK(e, cudaMemsetAsync(c->check, 0, sizeof *c->check, c->compute));
    CUDA_CHECK(e, cudaMemsetAsync(&c->check->first, 0xff, sizeof c->check->first, c->compute));
    return gpu_alloc_create(device, &c->alloc, e);
}

int be_cuda_create(int device, struct backend **out, struct err *e)
{
    *out = NULL;
    int n = 0;
    CUDA_CHECK(e, cudaGetDeviceCount(&n));
    if (device < 0 || device >= n)
        return err_set(e, ERR_INVALID_ARG, "cuda:%d: no such device (%d present)", device, n);
    /* The build carries sm_90 code and compute_80 PTX: older GPUs could not run a kernel. */
    int major = 0, minor = 0;
    CUDA_CHECK(e, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(e, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major < 8)
        return err_set(e, ERR_DEVICE,
                       "cuda:%d: compute capability %d.%d; traind's kernels need 8.0 or newer",
                       device, major, minor);
    struct cuda_backend *cb = calloc(1, sizeof *cb);
    if (!cb)
        return err_set(e, ERR_NOMEM, "cuda:%d: out of host memory", device);
    struct cuda_ctx *c = &cb->c;
    c->device = device;
    snprintf(c->name, sizeof c->name, "cuda:%d", device);
    int rc = setup(cb, device, e);
    if (rc) {
        destroy(cb);
        return err_prefix(e, "be_cuda_create(cuda:%d)", device);
    }
    c->be = (struct backend){
        .name = c->name,
        .ctx = c,
        .alloc = cu_alloc,
        .free = cu_free,
        .memset0 = cu_memset0,
        .to_host = cu_to_host,
        .from_host = cu_from_host,
        .k = &cuda_kernels,
    };
    cuda_table_fill(&c->be);
    *out = &c->be;
    return 0;
}

void be_cuda_destroy(struct backend *be)
{
    if (be && be_cuda_is(be))
        destroy((struct cuda_backend *)cuda_ctx_of(be));
}

bool be_cuda_is(const struct backend *be)
{
    return be && be->k == &cuda_kernels;
}

int be_cuda_device(const struct backend *be)
{
    return cuda_ctx_of(be)->device;
}

int be_cuda_synchronize(const struct backend *be, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    CUDA_CHECK(e, cudaStreamSynchronize(c->copy));
    CUDA_CHECK(e, cudaStreamSynchronize(c->side));
    return cuda_wait(c, e);
}

void be_cuda_memory_stats(const struct backend *be, struct gpu_mem_stats *out)
{
    gpu_alloc_stats(cuda_ctx_of(be)->alloc, out);
}

int be_cuda_empty_cache(const struct backend *be, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    return rc ? rc : gpu_alloc_empty_cache(c->alloc, e);
}

int be_cuda_uniform(const struct backend *be, struct tensor *t, uint64_t seed, uint64_t offset,
                    double lo, double hi, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    if (!tensor_is_contiguous(t))
        return err_set(e, ERR_INVALID_ARG, "be_cuda_uniform: %s: tensor is not contiguous",
                       c->name);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    return CUDA_LAUNCHED(e, "philox_uniform",
                         gk_philox_uniform(c->compute, gdt(t->dtype), tensor_numel(t), t->data,
                                           seed, offset, lo, hi));
}

/* ---- events and uploads ---- */

int be_cuda_event_new(const struct backend *be, struct gpu_event **out, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    *out = NULL;
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    struct gpu_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return err_set(e, ERR_NOMEM, "%s: out of host memory", c->name);
    ev->device = c->device;
    cudaError_t cr = cudaEventCreateWithFlags(&ev->ev, cudaEventDisableTiming);
    if (cr != cudaSuccess) {
        free(ev);
        return gpu_cuda_fail(e, __FILE__, __LINE__, "cudaEventCreateWithFlags", cr);
    }
    *out = ev;
    return 0;
}

void be_cuda_event_free(struct gpu_event *ev)
{
    if (!ev)
        return;
    CUDA_IGNORE(cudaEventDestroy(ev->ev));
    free(ev);
}

/* The copy of an upload on the copy stream, after `reusable` when the compute stream recorded it,
 * else after everything queued on the compute stream so far; then `copied` (be_cuda.h). */
static int copy_after(struct cuda_backend *cb, void *dst, const void *src, size_t bytes,
                      struct gpu_event *reusable, struct gpu_event *copied, struct err *e)
{
    struct cuda_ctx *c = &cb->c;
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    if (reusable && reusable->on_compute) {
        CUDA_CHECK(e, cudaStreamWaitEvent(c->copy, reusable->ev, 0));
    } else {   /* no record to go by (a CUDA event never recorded is no wait): dst's first
                  use, whose zero-fill may still be queued, waits for everything queued */
        CUDA_CHECK(e, cudaEventRecord(cb->ev.ordered, c->compute));
        CUDA_CHECK(e, cudaStreamWaitEvent(c->copy, cb->ev.ordered, 0));
    }
    if (bytes)
        CUDA_CHECK(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->copy));
    if (copied) {
        CUDA_CHECK(e, cudaEventRecord(copied->ev, c->copy));
        copied->on_compute = false;
    }
    return 0;
}

int be_cuda_upload_async(const struct backend *be, void *dst, const void *src, size_t bytes,
                         struct gpu_event *reusable, struct gpu_event *copied, struct err *e)
{
    struct cuda_backend *cb = (struct cuda_backend *)cuda_ctx_of(be);
    struct cuda_ctx *c = &cb->c;
    int rc = copy_after(cb, dst, src, bytes, reusable, copied, e);
    if (rc)
        return rc;
    CUDA_CHECK(e, cudaEventRecord(cb->ev.uploaded, c->copy));
    CUDA_CHECK(e, cudaStreamWaitEvent(c->compute, cb->ev.uploaded, 0));
    return 0;
}

int be_cuda_upload_start(const struct backend *be, void *dst, const void *src, size_t bytes,
                         struct gpu_event *reusable, struct gpu_event *copied, struct err *e)
{
    if (!copied)   /* without it nothing could ever wait for the copy */
        return err_set(e, ERR_INTERNAL, "%s: an upload started without a copied event", be->name);
    return copy_after((struct cuda_backend *)cuda_ctx_of(be), dst, src, bytes, reusable, copied, e);
}

int be_cuda_copy_on_device(const struct backend *be, void *dst, const void *src, size_t bytes,
                           struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc || bytes == 0)
        return rc;
    CUDA_CHECK(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->compute));
    return 0;
}

int be_cuda_free_memory(const struct backend *be, size_t *free_bytes, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    size_t total = 0;
    *free_bytes = 0;
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    CUDA_CHECK(e, cudaMemGetInfo(free_bytes, &total));
    return 0;
}

int be_cuda_compute_wait(const struct backend *be, struct gpu_event *ev, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    CUDA_CHECK(e, cudaStreamWaitEvent(c->compute, ev->ev, 0));
    return 0;
}

int be_cuda_compute_record(const struct backend *be, struct gpu_event *ev, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    CUDA_CHECK(e, cudaEventRecord(ev->ev, c->compute));
    ev->on_compute = true;
    return 0;
}

int be_cuda_side_wait(const struct backend *be, struct gpu_event *ev, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    CUDA_CHECK(e, cudaStreamWaitEvent(c->side, ev->ev, 0));
    return 0;
}

int be_cuda_side_record(const struct backend *be, struct gpu_event *ev, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    CUDA_CHECK(e, cudaEventRecord(ev->ev, c->side));
    ev->on_compute = false;   /* an upload must not take it for a point of the compute stream */
    return 0;
}

int be_cuda_event_query(struct gpu_event *ev, bool *done, struct err *e)
{
    cudaError_t rc = cudaEventQuery(ev->ev);
    *done = rc == cudaSuccess;
    if (rc == cudaSuccess || rc == cudaErrorNotReady) {
        if (rc == cudaErrorNotReady)
            (void)cudaGetLastError();
        return 0;
    }
    return gpu_cuda_fail(e, __FILE__, __LINE__, "cudaEventQuery", rc);
}
