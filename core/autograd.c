/* autograd.c — the tape: results and nodes in creation order, a buffer pool, the reverse walk. */
#include "ag_impl.h"

#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "tensor_impl.h"

struct pool_slot {
    struct tensor_buf *buf;   /* the pool holds one reference; free to reuse when refs == 1 */
    bool used;                /* handed out since the last reset */
};

struct ag_tape {
    struct tensor **owned;    /* op results, freed on reset */
    size_t n_owned, cap_owned;
    struct tensor **grads;    /* gradients of non-leaves, freed on reset and on backward */
    size_t n_grads, cap_grads;
    struct ag_node **nodes;   /* kept allocated across resets */
    size_t n_nodes, cap_nodes;
    struct pool_slot *pool;
    size_t n_pool, cap_pool;
    /* ag_backward_notify: by node, a bit for each input that is a leaf's earliest use */
    unsigned char *last_use;
    size_t cap_last_use;
    struct tensor **leaves;   /* the leaves seen while marking them */
    size_t cap_leaves;
};

static int grow(void **arr, size_t *cap, size_t need, size_t elem, struct err *e)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, nc * elem);
    if (!p)
        return err_set(e, ERR_NOMEM, "autograd: out of host memory");
    *arr = p;
    *cap = nc;
    return 0;
}

struct ag_tape *ag_tape_new(struct err *e)
{
    struct ag_tape *tp = calloc(1, sizeof *tp);
    if (!tp)
        err_set(e, ERR_NOMEM, "ag_tape_new: out of host memory");
    return tp;
}

static void free_grads(struct ag_tape *tp)
{
    for (size_t i = 0; i < tp->n_grads; i++)
        tensor_free(tp->grads[i]);
    tp->n_grads = 0;
    for (size_t i = 0; i < tp->n_owned; i++)
        tp->owned[i]->grad = NULL;
}

void ag_tape_reset(struct ag_tape *tp)
{
    if (!tp)
        return;
    free_grads(tp);
    for (size_t i = 0; i < tp->n_owned; i++)
        tensor_free(tp->owned[i]);
    tp->n_owned = 0;
    tp->n_nodes = 0;
    /* Keep the buffers this step used (the next step needs the same sizes); drop the rest. */
    size_t k = 0;
    for (size_t i = 0; i < tp->n_pool; i++) {
        struct pool_slot s = tp->pool[i];
        if (!s.used && s.buf->refs == 1) {
            tensor_buf_unref(s.buf);
            continue;
        }
        s.used = false;
        tp->pool[k++] = s;
    }
    tp->n_pool = k;
}

void ag_tape_free(struct ag_tape *tp)
{
    if (!tp)
        return;
    ag_tape_reset(tp);
    for (size_t i = 0; i < tp->n_pool; i++)
        tensor_buf_unref(tp->pool[i].buf);
    for (size_t i = 0; i < tp->cap_nodes; i++)
        free(tp->nodes[i]);
    free(tp->pool);
    free(tp->nodes);
    free(tp->owned);
    free(tp->grads);
    free(tp->last_use);
    free(tp->leaves);
    free(tp);
}

struct tensor *ag_new_result(struct ag_tape *tp, const struct backend *be, enum tensor_dtype dt,
                             int ndim, const int64_t *shape, struct err *e)
{
    int64_t n;
    if (!tp)
        return tensor_new_uninit(be, dt, ndim, shape, e);
    if (tensor_check_shape("autograd", ndim, shape, &n, e))
        return NULL;
    size_t bytes = (size_t)n * tensor_dtype_size(dt);
    for (size_t i = 0; i < tp->n_pool; i++) {
        struct pool_slot *s = &tp->pool[i];
        if (s->buf->refs == 1 && s->buf->bytes == bytes && s->buf->be == be) {
            s->used = true;
            return tensor_on_buf(s->buf, dt, ndim, shape, e);
        }
    }
    if (grow((void **)&tp->pool, &tp->cap_pool, tp->n_pool + 1, sizeof *tp->pool, e))
        return NULL;
    struct tensor_buf *b = tensor_buf_new(be, bytes, e);
    if (!b)
        return NULL;
    tp->pool[tp->n_pool++] = (struct pool_slot){b, true};
    return tensor_on_buf(b, dt, ndim, shape, e);
}

struct tensor *ag_record_n(struct ag_tape *tp, struct tensor *out, const char *name,
                           ag_backward_fn fn, struct tensor *const *in, int nin,
                           struct ag_node **node, struct err *e)
{
    if (node)
        *node = NULL;
    if (!tp || !out)
        return out;
    bool needs = false;
    for (int i = 0; i < nin; i++)
        needs = needs || (in[i] && in[i]->requires_grad);
    if (grow((void **)&tp->owned, &tp->cap_owned, tp->n_owned + 1, sizeof *tp->owned, e))
        goto fail;
    if (needs) {
        size_t old_cap = tp->cap_nodes;
        if (grow((void **)&tp->nodes, &tp->cap_nodes, tp->n_nodes + 1, sizeof *tp->nodes, e))
            goto fail;
        /* Node structs stay allocated across resets; new slots start empty. */
        for (size_t i = old_cap; i < tp->cap_nodes; i++)
            tp->nodes[i] = NULL;
        struct ag_node *n = tp->nodes[tp->n_nodes];
        if (!n && !(n = malloc(sizeof *n))) {
            err_set(e, ERR_NOMEM, "autograd: out of host memory");
            goto fail;
        }
        tp->nodes[tp->n_nodes++] = n;
        *n = (struct ag_node){.name = name, .backward = fn, .out = out, .nin = nin};
        for (int i = 0; i < nin; i++)
            n->in[i] = in[i];
        out->node = n;
        out->requires_grad = true;
        if (node)
            *node = n;
    }
    tp->owned[tp->n_owned++] = out;
    return out;
fail:
    tensor_free(out);
    return NULL;
}

struct tensor *ag_record(struct ag_tape *tp, struct tensor *out, const char *name,
                         ag_backward_fn fn, struct tensor *a, struct tensor *b, struct err *e)
{
    struct tensor *in[2] = {a, b};
    return ag_record_n(tp, out, name, fn, in, b ? 2 : 1, NULL, e);
}

static int add_grad(struct ag_tape *tp, struct tensor *g, struct err *e)
{
    if (grow((void **)&tp->grads, &tp->cap_grads, tp->n_grads + 1, sizeof *tp->grads, e)) {
        tensor_free(g);
        return ERR_NOMEM;
    }
    tp->grads[tp->n_grads++] = g;
    return 0;
}

int ag_grad_dst(struct ag_tape *tp, struct tensor *t, struct tensor **g, double *beta,
                struct err *e)
{
    if (t->grad) {
        *g = t->grad;
        *beta = 1;
        return 0;
    }
    if (!t->node) {
        char s[64];
        return err_set(e, ERR_INVALID_ARG, "ag_backward: leaf %s requires grad but has no ->grad",
                       tensor_shape_str(t, s, sizeof s));
    }
    struct tensor *n = ag_new_result(tp, t->be, t->dtype, t->ndim, t->shape, e);
    if (!n || add_grad(tp, n, e))
        return e ? e->code : ERR_NOMEM;
    t->grad = *g = n;
    *beta = 0;
    return 0;
}

bool ag_grad_alias(struct ag_tape *tp, struct tensor *t, const struct tensor *src,
                   struct err *e)
{
    if (t->grad || !t->node || !src->buf || !tensor_is_contiguous(src))
        return false;
    struct tensor *v = tensor_view_dup(src, NULL);
    if (!v)
        return false;
    tensor_set_contiguous(v, t->ndim, t->shape);
    if (add_grad(tp, v, NULL))
        return false;
    t->grad = v;
    return true;
}

/* A leaf whose gradient backward accumulates: a parameter. */
static bool is_leaf(const struct tensor *t)
{
    return t && !t->node && t->requires_grad && t->grad;
}

/*
 * tp->last_use[i]: bit k set when node i's input k is a leaf no earlier node takes, so the
 * reverse walk has finished that leaf's gradient once node i is done.
 */
static int mark_last_uses(struct ag_tape *tp, struct err *e)
{
    size_t n_leaves = 0;
    if (grow((void **)&tp->last_use, &tp->cap_last_use, tp->n_nodes, 1, e))
        return e->code;
    for (size_t i = 0; i < tp->n_nodes; i++) {
        const struct ag_node *n = tp->nodes[i];
        tp->last_use[i] = 0;
        for (int k = 0; k < n->nin; k++) {
            if (!is_leaf(n->in[k]))
                continue;
            size_t j = 0;
            while (j < n_leaves && tp->leaves[j] != n->in[k])
                j++;
            if (j < n_leaves)
                continue;   /* an earlier node (or input) takes it */
            if (grow((void **)&tp->leaves, &tp->cap_leaves, n_leaves + 1, sizeof *tp->leaves, e))
                return e->code;
            tp->leaves[n_leaves++] = n->in[k];
            tp->last_use[i] |= (unsigned char)(1u << k);
        }
    }
    return 0;
}

static int walk(struct ag_tape *tp, struct tensor *loss, ag_leaf_done_fn done, void *ctx,
                struct err *e)
{
    char s[64];
    if (!tp || !loss)
        return err_set(e, ERR_INVALID_ARG, "ag_backward: NULL tape or loss");
    if (tensor_numel(loss) != 1)
        return err_set(e, ERR_INVALID_ARG, "ag_backward: loss %s is not a scalar",
                       tensor_shape_str(loss, s, sizeof s));
    if (!loss->node)
        return err_set(e, ERR_INVALID_ARG,
                       "ag_backward: loss was not computed on this tape from a tensor that "
                       "requires grad");
    free_grads(tp);   /* a second backward on the same tape starts from scratch */
    int rc = done ? mark_last_uses(tp, e) : 0;
    struct tensor *g;
    double beta;
    if (rc || (rc = ag_grad_dst(tp, loss, &g, &beta, e)))
        return rc;
    if ((rc = loss->be->k->fill(loss->be, g, 1.0, e)))
        return rc;
    for (size_t i = tp->n_nodes; i-- > 0;) {
        struct ag_node *n = tp->nodes[i];
        if (n->out->grad && (rc = n->backward(tp, n, e)))   /* no grad: nothing downstream used it */
            return err_prefix(e, "ag_backward: %s", n->name);
        for (int k = 0; done && k < n->nin; k++)
            if ((tp->last_use[i] >> k & 1u) && (rc = done(ctx, n->in[k], e)))
                return rc;
    }
    return 0;
}

int ag_backward(struct ag_tape *tp, struct tensor *loss, struct err *e)
{
    return walk(tp, loss, NULL, NULL, e);
}

int ag_backward_notify(struct ag_tape *tp, struct tensor *loss, ag_leaf_done_fn done, void *ctx,
                       struct err *e)
{
    return walk(tp, loss, done, ctx, e);
}
