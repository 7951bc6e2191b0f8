/* be_cuda_nn.c — the CUDA backend's entries for MLPs and the losses: activations, softmax, cross entropy, BCE, the fused linear step. */
#include "be_cuda_impl.h"
#include "cuda_check.h"

/* kernels.h mirrors core's enum so the .cu files need no core header. */
_Static_assert(GK_ACT_RELU == (int)BE_ACT_RELU && GK_ACT_SIGMOID == (int)BE_ACT_SIGMOID &&
               GK_ACT_TANH == (int)BE_ACT_TANH, "enum gk_act must match enum be_act");

static enum gk_dtype gdt(enum tensor_dtype dt)
{
    return dt == TENSOR_F64 ? GK_F64 : GK_F32;
}

/* Element stride of dimension d (tensors keep bytes). */
static int64_t est(const struct tensor *t, int d)
{
    return t->stride[d] / (int64_t)tensor_dtype_size(t->dtype);
}

static int code_of(const struct err *e, int fallback)
{
    return e && e->code ? e->code : fallback;
}

/* Scratch doubles from the backend's cache (at least one, so n == 0 still gets a pointer). */
static double *scratch_get(struct cuda_ctx *c, size_t n, struct err *e)
{
    return gpu_alloc_get(c->alloc, (n ? n : 1) * sizeof(double), e);
}

/* ---- elementwise ---- */

int cuda_k_act(const struct backend *be, enum be_act op, const struct tensor *a,
               struct tensor *out, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    struct gk_iter it;
    const int64_t *st[] = {out->stride, a->stride};
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    cuda_iter_make(&it, out->ndim, out->shape, 2, st);
    return CUDA_LAUNCHED(e, "act", gk_act(c->compute, gdt(out->dtype), (enum gk_act)op, it,
                                          out->data, a->data));
}

int cuda_k_act_backward(const struct backend *be, enum be_act op, const struct tensor *x,
                        const struct tensor *y, const struct tensor *gout,
                        struct tensor *gin, double beta, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    /* relu, sigmoid and tanh's derivatives read the output alone: three operands, not four. */
    const struct tensor *v = y;
    struct gk_iter it;
    const int64_t *st[] = {gin->stride, v->stride, gout->stride};
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    cuda_iter_make(&it, gin->ndim, gin->shape, 3, st);
    return CUDA_LAUNCHED(e, "act_backward",
                         gk_act_backward(c->compute, gdt(gin->dtype), (enum gk_act)op, it,
                                         gin->data, v->data, gout->data, beta));
}

int cuda_k_bias_act(const struct backend *be, struct tensor *out, const struct tensor *b,
                    enum be_act op, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    if (op != BE_ACT_RELU && op != BE_ACT_SIGMOID && op != BE_ACT_TANH)
        return err_set(e, ERR_INVALID_ARG, "bias_act: activation %d", (int)op);
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    return CUDA_LAUNCHED(e, "bias_act", gk_bias_act(c->compute, gdt(out->dtype),
                                                    (enum gk_act)op, out->shape[0],
                                                    out->shape[1], out->data, b->data));
}

/* ---- softmax ---- */

int cuda_k_softmax(const struct backend *be, const struct tensor *a, struct tensor *out,
                   struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    struct gk_rows r = {.n = a->shape[0], .cols = a->shape[1], .ar = est(a, 0), .ac = est(a, 1)};
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    return CUDA_LAUNCHED(e, "softmax", gk_softmax(c->compute, gdt(a->dtype), r, a->data,
                                                  out->data));
}

int cuda_k_softmax_backward(const struct backend *be, const struct tensor *y,
                            const struct tensor *gout, struct tensor *gin, double beta,
                            struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    struct gk_rows r = {.n = y->shape[0], .cols = y->shape[1], .ar = est(y, 0), .ac = est(y, 1),
                        .gr = est(gout, 0), .gc = est(gout, 1)};
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    return CUDA_LAUNCHED(e, "softmax_backward",
                         gk_softmax_backward(c->compute, gdt(y->dtype), r, y->data, gout->data,
                                             gin->data, beta));
}

/* ---- cross entropy ---- */

// logits (N, C), labels (N) or (N, 1), any strides -> out (1) = mean_i (logsumexp(x_i) - x_i[l_i])
int cuda_k_xent(const struct backend *be, const struct tensor *logits,
                const struct tensor *labels, struct tensor *out, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int64_t n = logits->shape[0];
    struct gk_rows r = {.n = n, .cols = logits->shape[1], .ar = est(logits, 0),
                        .ac = est(logits, 1), .ls = est(labels, 0)};
    int rc = cuda_enter(c, e) || cuda_check_labels(c, labels, r.cols, e) ? e->code : 0;
    if (rc)
        return rc;
    double *loss = scratch_get(c, (size_t)n, e);   /* per row */
    if (!loss)
        return code_of(e, ERR_OUT_OF_MEMORY);
    rc = CUDA_LAUNCHED(e, "xent", gk_xent_rows(c->compute, gdt(logits->dtype), r, logits->data,
                                               labels->data, loss));
    if (!rc) {   /* the mean, in the loss's dtype, summed in a fixed order */
        struct gk_reduce m = {.dt = gdt(out->dtype), .load = GK_LOAD_X, .in_f64 = true,
                              .alpha = 1, .beta = 0, .div = (double)n};
        const int64_t st8[] = {8}, *st[] = {st8, st8, st8};
        cuda_iter_make(&m.outer, 0, NULL, 0, NULL);
        cuda_iter_make(&m.inner, 1, &n, 3, st);
        rc = cuda_reduce_launch(c, &m, out->data, (const char *)loss, (const char *)loss, e);
    }
    gpu_alloc_put(c->alloc, loss);   /* stream order makes the reuse safe */
    return rc;
}

int cuda_k_xent_backward(const struct backend *be, const struct tensor *logits,
                         const struct tensor *labels, const struct tensor *gout,
                         struct tensor *glogits, double beta, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    struct gk_rows r = {.n = logits->shape[0], .cols = logits->shape[1], .ar = est(logits, 0),
                        .ac = est(logits, 1), .ls = est(labels, 0)};
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    return CUDA_LAUNCHED(e, "xent_backward",
                         gk_xent_backward(c->compute, gdt(logits->dtype), r, logits->data,
                                          labels->data, gout->data, glogits->data, beta));
}

/* ---- binary cross entropy with logits ---- */

// x, y (same shape, any strides) -> out (1) = mean of PyTorch's stable BCE with logits
int cuda_k_bce_logits(const struct backend *be, const struct tensor *x, const struct tensor *y,
                      struct tensor *out, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int rc = cuda_enter(c, e) || cuda_check_labels(c, y, BE_LABEL_UNIT, e) ? e->code : 0;
    if (rc)
        return rc;
    struct gk_reduce m = {.dt = gdt(x->dtype), .load = GK_LOAD_BCE, .alpha = 1, .beta = 0,
                          .div = (double)tensor_numel(x)};
    const int64_t *st[] = {x->stride, x->stride, y->stride};
    cuda_iter_make(&m.outer, 0, NULL, 0, NULL);
    cuda_iter_make(&m.inner, x->ndim, x->shape, 3, st);
    return cuda_reduce_launch(c, &m, out->data, x->data, y->data, e);
}

int cuda_k_bce_logits_backward(const struct backend *be, const struct tensor *x,
                               const struct tensor *y, const struct tensor *gout,
                               struct tensor *gx, double beta, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    struct gk_iter it;
    const int64_t *st[] = {gx->stride, x->stride, y->stride};
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    cuda_iter_make(&it, gx->ndim, gx->shape, 3, st);
    return CUDA_LAUNCHED(e, "bce_backward",
                         gk_bce_backward(c->compute, gdt(x->dtype), it, gx->data, x->data,
                                         y->data, gout->data, (double)tensor_numel(x), beta));
}

/* ---- the fused linear step ---- */

// x (N, F), w (F, 1), b (1, 1), y (N) -> loss (1), gw (F, 1), gb (1, 1), all in one pass
int cuda_k_linear_mse(const struct backend *be, const struct tensor *x, const struct tensor *w,
                      const struct tensor *b, const struct tensor *y, struct tensor *loss,
                      struct tensor *gw, struct tensor *gb, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    struct gk_linear_mse a = {.dt = gdt(x->dtype), .n = x->shape[0], .f = x->shape[1],
                              .sx0 = est(x, 0), .sx1 = est(x, 1), .sw = est(w, 0),
                              .sy = est(y, 0)};
    int rc = cuda_enter(c, e);
    if (rc)
        return rc;
    double *s = scratch_get(c, gk_linear_mse_scratch(&a), e);
    if (!s)
        return code_of(e, ERR_OUT_OF_MEMORY);
    rc = CUDA_LAUNCHED(e, "linear_mse", gk_linear_mse_run(c->compute, &a, x->data, w->data,
                                                          b->data, y->data, loss->data,
                                                          gw->data, gb->data, s));
    gpu_alloc_put(c->alloc, s);
    return rc;
}
