/* nn.c — the linear regression model over flat parameter/gradient buffers, init and MSE loss. */
#include "nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "be_cpu.h"
#include "ops.h"
#include "tensor_impl.h"

#define NN_MAX_PARAMS 8

struct nn_model {
    const struct backend *be;
    enum tensor_dtype dt;
    int64_t n_features;
    struct tensor *params_flat, *grads_flat;      /* own the memory */
    int n_params;
    struct tensor *param[NN_MAX_PARAMS];          /* views into params_flat */
    struct tensor *grad[NN_MAX_PARAMS];           /* views into grads_flat */
    const char *name[NN_MAX_PARAMS];
};

void nn_model_free(struct nn_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_params; i++) {
        tensor_free(m->param[i]);
        tensor_free(m->grad[i]);
    }
    tensor_free(m->params_flat);
    tensor_free(m->grads_flat);
    free(m);
}

/* A (rows, cols) view of flat[off : off + rows * cols]. */
static struct tensor *flat_view(struct tensor *flat, int64_t off, int64_t rows, int64_t cols,
                                struct err *e)
{
    struct tensor *s = tensor_slice(flat, 0, off, off + rows * cols, e);
    if (!s)
        return NULL;
    int64_t shape[2] = {rows, cols};
    struct tensor *v = tensor_reshape_view(s, 2, shape, e);
    tensor_free(s);
    return v;
}

/* Adds parameter `name` of shape (rows, cols) at offset off of both flat buffers. */
static int add_param(struct nn_model *m, const char *name, int64_t off, int64_t rows,
                     int64_t cols, struct err *e)
{
    int i = m->n_params;
    m->param[i] = flat_view(m->params_flat, off, rows, cols, e);
    m->grad[i] = m->param[i] ? flat_view(m->grads_flat, off, rows, cols, e) : NULL;
    if (!m->grad[i]) {
        tensor_free(m->param[i]);
        return e ? e->code : ERR_NOMEM;
    }
    m->param[i]->requires_grad = true;
    m->param[i]->grad = m->grad[i];
    m->name[i] = name;
    m->n_params++;
    return 0;
}

int nn_linear_regression(const struct backend *be, enum tensor_dtype dt, int64_t n_features,
                         struct nn_model **out, struct err *e)
{
    *out = NULL;
    if (!be)
        return err_set(e, ERR_INVALID_ARG, "nn_linear_regression: no backend");
    if (n_features < 1)
        return err_set(e, ERR_INVALID_ARG, "nn_linear_regression: %lld features",
                       (long long)n_features);
    struct nn_model *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(e, ERR_NOMEM, "nn_linear_regression: out of host memory");
    m->be = be;
    m->dt = dt;
    m->n_features = n_features;
    int64_t total = n_features + 1;
    m->params_flat = tensor_new(be, dt, 1, &total, e);
    m->grads_flat = m->params_flat ? tensor_new(be, dt, 1, &total, e) : NULL;
    if (!m->grads_flat || add_param(m, "w", 0, n_features, 1, e) ||
        add_param(m, "b", n_features, 1, 1, e)) {
        nn_model_free(m);
        return err_prefix(e, "nn_linear_regression");
    }
    *out = m;
    return 0;
}

int nn_init_kaiming_uniform(struct nn_model *m, struct rng *r, struct err *e)
{
    if (!m || !r)
        return err_set(e, ERR_INVALID_ARG, "nn_init_kaiming_uniform: NULL argument");
    int64_t total = tensor_numel(m->params_flat), off = 0;
    double *host = malloc(sizeof(double) * (size_t)total);
    if (!host)
        return err_set(e, ERR_NOMEM, "nn_init_kaiming_uniform: out of host memory");
    for (int i = 0; i < m->n_params; i++) {
        struct tensor *p = m->param[i];
        /* torch's own arithmetic, so the bound is the same double: fan_in = size(1),
         * gain = sqrt(2) (leaky_relu, a = 0), std = gain / sqrt(fan_in), bound = sqrt(3) * std. */
        int64_t fan_in = p->ndim >= 2 ? p->shape[1] : p->shape[0];
        double bound = sqrt(3.0) * (sqrt(2.0) / sqrt((double)fan_in));
        for (int64_t j = 0; j < tensor_numel(p); j++)
            host[off++] = p->dtype == TENSOR_F64
                              ? rng_uniform_f64(r, -bound, bound)
                              : (double)rng_uniform_f32(r, (float)-bound, (float)bound);
    }
    int rc = tensor_copy_from_host_f64(m->params_flat, host, e);
    free(host);
    return rc;
}

struct tensor *nn_forward(struct nn_model *m, struct ag_tape *tp, struct tensor *x, struct err *e)
{
    char s[64];
    if (!m || !x) {
        err_set(e, ERR_INVALID_ARG, "nn_forward: NULL argument");
        return NULL;
    }
    if (x->ndim != 2 || x->shape[1] != m->n_features) {
        err_set(e, ERR_INVALID_ARG, "nn_forward: input %s, expected (N, %lld)",
                tensor_shape_str(x, s, sizeof s), (long long)m->n_features);
        return NULL;
    }
    /* squeeze(X @ w + b): (N, F) @ (F, 1) + (1, 1) -> (N, 1) -> (N) */
    struct tensor *y = op_matmul(tp, x, m->param[0], e), *z = NULL, *out = NULL;
    if (y)
        z = op_add(tp, y, m->param[1], e);
    if (z)
        out = op_squeeze(tp, z, e);
    if (!tp) {   /* without a tape the intermediates are ours */
        tensor_free(y);
        tensor_free(z);
    }
    return out;
}

struct tensor *nn_mse_loss(struct ag_tape *tp, struct tensor *pred, struct tensor *target,
                           struct err *e)
{
    if (pred && target && pred->ndim == target->ndim &&
        memcmp(pred->shape, target->shape, sizeof(int64_t) * (size_t)pred->ndim) == 0)
        return op_mse(tp, pred, target, e);
    /* Different shapes broadcast, as torch's mse_loss does (with a warning there). */
    struct tensor *d = op_sub(tp, pred, target, e), *sq = NULL, *out = NULL;
    if (d)
        sq = op_square(tp, d, e);
    if (sq)
        out = op_mean(tp, sq, e);
    if (!tp) {
        tensor_free(d);
        tensor_free(sq);
    }
    if (!out)
        err_prefix(e, "nn_mse_loss");
    return out;
}

int nn_num_params(const struct nn_model *m)
{
    return m ? m->n_params : 0;
}

struct tensor *nn_param(struct nn_model *m, int i)
{
    return m && i >= 0 && i < m->n_params ? m->param[i] : NULL;
}

const char *nn_param_name(const struct nn_model *m, int i)
{
    return m && i >= 0 && i < m->n_params ? m->name[i] : NULL;
}

struct tensor *nn_params_flat(struct nn_model *m)
{
    return m ? m->params_flat : NULL;
}

struct tensor *nn_grads_flat(struct nn_model *m)
{
    return m ? m->grads_flat : NULL;
}

void nn_zero_grad(struct nn_model *m)
{
    if (m)
        m->be->k->fill(m->be, m->grads_flat, 0, NULL);
}

enum tensor_dtype nn_dtype(const struct nn_model *m)
{
    return m->dt;
}
