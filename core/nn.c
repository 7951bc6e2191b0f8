/* nn.c — models over flat parameter/gradient buffers (the linear model, nn.Sequential), inits. */
#include "nn.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ops.h"
#include "ops_impl.h"
#include "tensor_impl.h"

#define NN_MAX_PARAMS (2 * NN_MAX_LAYERS)

struct nn_layer {
    enum nn_layer_kind kind;
    int64_t in, out;
    int w;                                        /* parameter index of the weight (bias w + 1) */
};

struct nn_model {
    const struct backend *be;
    enum tensor_dtype dt;
    int64_t n_features, n_out;
    bool sequential;                              /* else the DC-taxi baseline's w, b */
    struct tensor *params_flat, *grads_flat;      /* own the memory */
    int n_params;
    struct tensor *param[NN_MAX_PARAMS];          /* views into params_flat */
    struct tensor *grad[NN_MAX_PARAMS];           /* views into grads_flat */
    char name[NN_MAX_PARAMS][24];
    int n_layers;
    struct nn_layer layer[NN_MAX_LAYERS];
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

/* A view of flat[off : off + numel] with shape (ndim, shape). */
static struct tensor *flat_view(struct tensor *flat, int64_t off, int ndim, const int64_t *shape,
                                struct err *e)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    struct tensor *s = tensor_slice(flat, 0, off, off + n, e);
    if (!s)
        return NULL;
    struct tensor *v = tensor_reshape_view(s, ndim, shape, e);
    tensor_free(s);
    return v;
}

/* Adds parameter `name` of shape (ndim, shape) at offset off of both flat buffers. */
static int add_param(struct nn_model *m, const char *name, int64_t off, int ndim,
                     const int64_t *shape, struct err *e)
{
    int i = m->n_params;
    m->param[i] = flat_view(m->params_flat, off, ndim, shape, e);
    m->grad[i] = m->param[i] ? flat_view(m->grads_flat, off, ndim, shape, e) : NULL;
    if (!m->grad[i]) {
        tensor_free(m->param[i]);
        return e ? e->code : ERR_NOMEM;
    }
    m->param[i]->requires_grad = true;
    m->param[i]->grad = m->grad[i];
    snprintf(m->name[i], sizeof m->name[i], "%s", name);
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
    m->n_out = 1;
    int64_t total = n_features + 1, wshape[2] = {n_features, 1}, bshape[2] = {1, 1};
    m->params_flat = tensor_new(be, dt, 1, &total, e);
    m->grads_flat = m->params_flat ? tensor_new(be, dt, 1, &total, e) : NULL;
    if (!m->grads_flat || add_param(m, "w", 0, 2, wshape, e) ||
        add_param(m, "b", n_features, 2, bshape, e)) {
        nn_model_free(m);
        return err_prefix(e, "nn_linear_regression");
    }
    *out = m;
    return 0;
}

static const char *const layer_names[] = {
    [NN_LAYER_LINEAR] = "linear", [NN_LAYER_RELU] = "relu", [NN_LAYER_SIGMOID] = "sigmoid",
    [NN_LAYER_TANH] = "tanh", [NN_LAYER_SOFTMAX] = "softmax",
};

const char *nn_layer_kind_name(enum nn_layer_kind kind)
{
    return (unsigned)kind < sizeof layer_names / sizeof *layer_names ? layer_names[kind] : "?";
}

int nn_layer_kind_parse(const char *name, enum nn_layer_kind *out)
{
    for (size_t i = 0; name && i < sizeof layer_names / sizeof *layer_names; i++)
        if (strcmp(name, layer_names[i]) == 0) {
            *out = (enum nn_layer_kind)i;
            return 0;
        }
    return ERR_INVALID_ARG;
}

/* Checks the layer list and fills m->layer, counting parameters; no memory yet. */
static int plan_layers(struct nn_model *m, int64_t n_in, const struct nn_layer_spec *layers,
                       int n_layers, int64_t *total, struct err *e)
{
    if (n_in < 1)
        return err_set(e, ERR_INVALID_ARG, "nn_sequential: %lld input features", (long long)n_in);
    if (n_layers < 0 || n_layers > NN_MAX_LAYERS || (n_layers && !layers))
        return err_set(e, ERR_INVALID_ARG, "nn_sequential: %d layers (at most %d)", n_layers,
                       NN_MAX_LAYERS);
    int64_t width = n_in;
    *total = 0;
    for (int i = 0; i < n_layers; i++) {
        struct nn_layer *l = &m->layer[i];
        l->kind = layers[i].kind;
        l->in = l->out = width;
        l->w = -1;
        if ((unsigned)l->kind >= sizeof layer_names / sizeof *layer_names)
            return err_set(e, ERR_INVALID_ARG, "nn_sequential: layer %d: unknown kind %d", i,
                           (int)l->kind);
        if (l->kind != NN_LAYER_LINEAR)
            continue;
        int64_t out = layers[i].out_features;
        if (out < 1 || out > (int64_t)1 << 24 || width > (INT64_MAX / 8 - *total) / (out + 1))
            return err_set(e, ERR_INVALID_ARG, "nn_sequential: layer %d: %lld output features",
                           i, (long long)out);
        l->out = out;
        *total += out * width + out;
        width = out;
    }
    m->n_layers = n_layers;
    m->n_features = n_in;
    m->n_out = width;
    return 0;
}

int nn_sequential(const struct backend *be, enum tensor_dtype dt, int64_t n_in,
                  const struct nn_layer_spec *layers, int n_layers, struct nn_model **out,
                  struct err *e)
{
    int64_t total;
    *out = NULL;
    if (!be)
        return err_set(e, ERR_INVALID_ARG, "nn_sequential: no backend");
    struct nn_model *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(e, ERR_NOMEM, "nn_sequential: out of host memory");
    m->be = be;
    m->dt = dt;
    m->sequential = true;
    int rc = plan_layers(m, n_in, layers, n_layers, &total, e);
    if (rc) {
        free(m);
        return rc;
    }
    m->params_flat = tensor_new(be, dt, 1, &total, e);
    m->grads_flat = m->params_flat ? tensor_new(be, dt, 1, &total, e) : NULL;
    rc = m->grads_flat ? 0 : (e ? e->code : ERR_NOMEM);
    int64_t off = 0;
    for (int i = 0; !rc && i < m->n_layers; i++) {
        struct nn_layer *l = &m->layer[i];
        if (l->kind != NN_LAYER_LINEAR)
            continue;
        char name[24];
        int64_t wshape[2] = {l->out, l->in};
        l->w = m->n_params;
        snprintf(name, sizeof name, "%d.weight", i);
        rc = add_param(m, name, off, 2, wshape, e);
        off += l->out * l->in;
        snprintf(name, sizeof name, "%d.bias", i);
        if (!rc)
            rc = add_param(m, name, off, 1, &l->out, e);
        off += l->out;
    }
    if (rc) {
        nn_model_free(m);
        return err_prefix(e, "nn_sequential");
    }
    *out = m;
    return 0;
}

int nn_mlp(const struct backend *be, enum tensor_dtype dt, int64_t n_in, const int64_t *hidden,
           int n_hidden, enum nn_layer_kind activation, int64_t n_out, struct nn_model **out,
           struct err *e)
{
    struct nn_layer_spec spec[NN_MAX_LAYERS];
    int n = 0;
    *out = NULL;
    if (n_hidden < 0 || 2 * n_hidden + 1 > NN_MAX_LAYERS || (n_hidden && !hidden))
        return err_set(e, ERR_INVALID_ARG, "nn_mlp: %d hidden layers (at most %d)", n_hidden,
                       (NN_MAX_LAYERS - 1) / 2);
    if (activation == NN_LAYER_LINEAR || (unsigned)activation >= sizeof layer_names / sizeof *layer_names)
        return err_set(e, ERR_INVALID_ARG, "nn_mlp: activation %s is not an activation",
                       nn_layer_kind_name(activation));
    for (int i = 0; i < n_hidden; i++) {
        spec[n++] = (struct nn_layer_spec){NN_LAYER_LINEAR, hidden[i]};
        spec[n++] = (struct nn_layer_spec){activation, 0};
    }
    spec[n++] = (struct nn_layer_spec){NN_LAYER_LINEAR, n_out};
    return nn_sequential(be, dt, n_in, spec, n, out, e);
}

int64_t nn_num_inputs(const struct nn_model *m)
{
    return m ? m->n_features : 0;
}

int64_t nn_num_outputs(const struct nn_model *m)
{
    return m ? m->n_out : 0;
}

/* Draws n values of U(-bound, bound) into host[0..n) as uniform_ on a tensor of dtype dt. */
static void draw_uniform(struct rng *r, enum tensor_dtype dt, double bound, int64_t n,
                         double *host)
{
    for (int64_t j = 0; j < n; j++)
        host[j] = dt == TENSOR_F64 ? rng_uniform_f64(r, -bound, bound)
                                   : (double)rng_uniform_f32(r, (float)-bound, (float)bound);
}

/* torch.nn.init's arithmetic, step for step, so the bound is the same double:
 * gain = sqrt(2 / (1 + a^2)), std = gain / sqrt(fan_in), bound = sqrt(3) * std. */
static double kaiming_bound(double a, int64_t fan_in)
{
    double gain = sqrt(2.0 / (1 + a * a));
    return sqrt(3.0) * (gain / sqrt((double)fan_in));
}

int nn_init(struct nn_model *m, enum nn_init_kind kind, struct rng *r, struct err *e)
{
    if (!m || !r)
        return err_set(e, ERR_INVALID_ARG, "nn_init: NULL argument");
    if (kind != NN_INIT_DEFAULT && kind != NN_INIT_KAIMING_UNIFORM)
        return err_set(e, ERR_INVALID_ARG, "nn_init: unknown init %d", (int)kind);
    if (!m->sequential)
        return nn_init_kaiming_uniform(m, r, e);
    int64_t total = tensor_numel(m->params_flat), off = 0;
    double *host = malloc(sizeof(double) * (size_t)(total ? total : 1));
    if (!host)
        return err_set(e, ERR_NOMEM, "nn_init: out of host memory");
    for (int i = 0; i < m->n_layers; i++) {
        const struct nn_layer *l = &m->layer[i];
        if (l->kind != NN_LAYER_LINEAR)
            continue;
        /* nn.Linear.reset_parameters: kaiming_uniform_(weight, a=math.sqrt(5)), then the
         * bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
        double a = kind == NN_INIT_DEFAULT ? sqrt(5.0) : 0.0;
        draw_uniform(r, m->dt, kaiming_bound(a, l->in), l->out * l->in, host + off);
        off += l->out * l->in;
        draw_uniform(r, m->dt, 1 / sqrt((double)l->in), l->out, host + off);
        off += l->out;
    }
    int rc = tensor_copy_from_host_f64(m->params_flat, host, e);
    free(host);
    return rc;
}

int nn_init_kaiming_uniform(struct nn_model *m, struct rng *r, struct err *e)
{
    if (!m || !r)
        return err_set(e, ERR_INVALID_ARG, "nn_init_kaiming_uniform: NULL argument");
    if (m->sequential)
        return nn_init(m, NN_INIT_KAIMING_UNIFORM, r, e);
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
        draw_uniform(r, p->dtype, bound, tensor_numel(p), host + off);
        off += tensor_numel(p);
    }
    int rc = tensor_copy_from_host_f64(m->params_flat, host, e);
    free(host);
    return rc;
}

static struct tensor *layer_forward(struct nn_model *m, const struct nn_layer *l,
                                    struct ag_tape *tp, struct tensor *h, struct err *e)
{
    switch (l->kind) {
    case NN_LAYER_LINEAR: return op_linear(tp, h, m->param[l->w], m->param[l->w + 1], e);
    case NN_LAYER_RELU: return op_relu(tp, h, e);
    case NN_LAYER_SIGMOID: return op_sigmoid(tp, h, e);
    case NN_LAYER_TANH: return op_tanh(tp, h, e);
    case NN_LAYER_SOFTMAX: return op_softmax(tp, h, e);
    }
    err_set(e, ERR_INVALID_ARG, "nn_forward: unknown layer kind %d", (int)l->kind);
    return NULL;
}

/* The activation a Linear layer followed by layer l fuses with (bias_act), or -1. */
static int fusable_act(const struct nn_layer *l)
{
    switch (l->kind) {
    case NN_LAYER_RELU: return BE_ACT_RELU;
    case NN_LAYER_SIGMOID: return BE_ACT_SIGMOID;
    case NN_LAYER_TANH: return BE_ACT_TANH;
    default: return -1;
    }
}

static struct tensor *sequential_forward(struct nn_model *m, struct ag_tape *tp, struct tensor *x,
                                         struct err *e)
{
    struct tensor *h = x;
    for (int i = 0; i < m->n_layers; i++) {
        const struct nn_layer *l = &m->layer[i];
        int act = i + 1 < m->n_layers ? fusable_act(&m->layer[i + 1]) : -1;
        struct tensor *next;
        if (l->kind == NN_LAYER_LINEAR && act >= 0 && op_linear_act_supported(h, (enum be_act)act)) {
            /* Linear + activation in one op: one pass after the GEMM instead of three */
            next = op_linear_act(tp, h, m->param[l->w], m->param[l->w + 1], (enum be_act)act, e);
            if (!tp && h != x)
                tensor_free(h);
            if (!next) {
                err_prefix(e, "nn_forward: layers %d-%d (linear, %s)", i, i + 1,
                           nn_layer_kind_name(m->layer[i + 1].kind));
                return NULL;
            }
            h = next;
            i++;
            continue;
        }
        next = layer_forward(m, l, tp, h, e);
        if (!tp && h != x)   /* without a tape the intermediates are ours */
            tensor_free(h);
        if (!next) {
            err_prefix(e, "nn_forward: layer %d (%s)", i, nn_layer_kind_name(m->layer[i].kind));
            return NULL;
        }
        h = next;
    }
    if (h == x)   /* no layers: the input itself, as a view the caller may free */
        return tensor_view_dup(x, e);
    return h;
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
    if (m->sequential)
        return sequential_forward(m, tp, x, e);
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

struct tensor *nn_forward_loss(struct nn_model *m, struct ag_tape *tp, enum nn_loss_kind kind,
                               struct tensor *x, struct tensor *target, struct err *e)
{
    char s[64];
    if (!m || !x || !target) {
        err_set(e, ERR_INVALID_ARG, "nn_forward_loss: NULL argument");
        return NULL;
    }
    const struct be_kernels *k = x->be ? x->be->k : NULL;
    bool fused = !m->sequential && kind == NN_LOSS_MSE && k && k->linear_mse &&
                 (!k->supports || k->supports(x->be, BE_OP_LINEAR_MSE, x->dtype)) &&
                 !x->requires_grad && !target->requires_grad && target->ndim == 1 &&
                 x->ndim == 2 && target->shape[0] == x->shape[0] && x->dtype == m->dt &&
                 target->dtype == m->dt && x->be == m->be && target->be == m->be;
    if (fused) {
        if (x->shape[1] != m->n_features) {
            err_set(e, ERR_INVALID_ARG, "nn_forward: input %s, expected (N, %lld)",
                    tensor_shape_str(x, s, sizeof s), (long long)m->n_features);
            return NULL;
        }
        return op_linear_mse(tp, x, m->param[0], m->param[1], target, e);
    }
    struct tensor *pred = nn_forward(m, tp, x, e);
    if (!pred)
        return NULL;
    struct tensor *loss = nn_loss(tp, kind, pred, target, e);
    if (!tp)
        tensor_free(pred);
    return loss;
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

int nn_grads_scale(struct nn_model *m, double alpha, struct err *e)
{
    return m->be->k->scale(m->be, m->grads_flat, alpha, e);
}

int nn_grads_scale_part(struct nn_model *m, size_t lo, size_t n, double alpha, struct err *e)
{
    int64_t shape[1] = {(int64_t)n};
    struct tensor *part = tensor_wrap(m->be, m->grads_flat->data + lo * tensor_dtype_size(m->dt), m->dt, 1,
                                      shape, NULL, e);
    if (!part)
        return e->code;
    int rc = m->be->k->scale(m->be, part, alpha, e);
    tensor_free(part);
    return rc;
}

enum tensor_dtype nn_dtype(const struct nn_model *m)
{
    return m->dt;
}

struct ready_walk {
    struct nn_model *m;
    bool done[NN_MAX_PARAMS];
    int suffix;                 /* params [suffix, n_params) are complete */
    nn_grads_ready_fn ready;
    void *ctx;
};

/* The flat gradient's offset of param i, in elements. */
static size_t grad_offset(const struct nn_model *m, int i)
{
    return (size_t)(m->grad[i]->data - m->grads_flat->data) / tensor_dtype_size(m->dt);
}

static int leaf_done(void *ctx, struct tensor *leaf, struct err *e)
{
    (void)e;
    struct ready_walk *w = ctx;
    for (int i = 0; i < w->m->n_params; i++)
        if (w->m->param[i] == leaf)
            w->done[i] = true;
    int s = w->suffix;
    while (s > 0 && w->done[s - 1])
        s--;
    if (s < w->suffix) {
        w->suffix = s;
        w->ready(w->ctx, grad_offset(w->m, s));
    }
    return 0;
}

int nn_backward_ready(struct nn_model *m, struct ag_tape *tp, struct tensor *loss, nn_grads_ready_fn ready,
                      void *ctx, struct err *e)
{
    struct ready_walk w = {.m = m, .suffix = m->n_params, .ready = ready, .ctx = ctx};
    if (ag_backward_notify(tp, loss, leaf_done, &w, e))
        return e->code;
    if (w.suffix > 0)   /* parameters the loss does not use: their gradients stay as they are */
        ready(ctx, 0);
    return 0;
}
