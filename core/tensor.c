/* tensor.c — strided views over reference-counted backend buffers, and host copies. */
#include "tensor_impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

size_t tensor_dtype_size(enum tensor_dtype dt)
{
    return dt == TENSOR_F32 ? 4 : 8;
}

const char *tensor_dtype_name(enum tensor_dtype dt)
{
    return dt == TENSOR_F32 ? "float32" : "float64";
}

int tensor_dtype_parse(const char *name, enum tensor_dtype *out)
{
    if (name && (strcmp(name, "float32") == 0 || strcmp(name, "f32") == 0)) {
        *out = TENSOR_F32;
        return 0;
    }
    if (name && (strcmp(name, "float64") == 0 || strcmp(name, "f64") == 0)) {
        *out = TENSOR_F64;
        return 0;
    }
    return ERR_INVALID_ARG;
}

int64_t tensor_numel(const struct tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

bool tensor_is_contiguous(const struct tensor *t)
{
    int64_t want = (int64_t)tensor_dtype_size(t->dtype);
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != want)
            return false;
        want *= t->shape[i];
    }
    return true;
}

const char *tensor_shape_str(const struct tensor *t, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    len += (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < t->ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, i ? ", %lld" : "%lld",
                                (long long)t->shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, t->ndim == 1 ? ",)" : ")");
    return buf;
}

struct tensor_buf *tensor_buf_new(const struct backend *be, size_t bytes, struct err *e)
{
    struct tensor_buf *b = calloc(1, sizeof *b);
    if (!b) {
        err_set(e, ERR_NOMEM, "tensor: out of host memory");
        return NULL;
    }
    b->data = be->alloc(be, bytes ? bytes : 1, e);
    if (!b->data) {
        free(b);
        return NULL;
    }
    b->refs = 1;
    b->be = be;
    b->bytes = bytes;
    return b;
}

void tensor_buf_ref(struct tensor_buf *b)
{
    if (b)
        b->refs++;
}

void tensor_buf_unref(struct tensor_buf *b)
{
    if (b && --b->refs == 0) {
        b->be->free(b->be, b->data);
        free(b);
    }
}

int tensor_check_shape(const char *who, int ndim, const int64_t *shape, int64_t *numel,
                       struct err *e)
{
    if (ndim < 0 || ndim > TENSOR_MAX_DIMS)
        return err_set(e, ERR_INVALID_ARG, "%s: %d dimensions (at most %d)", who, ndim,
                       TENSOR_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return err_set(e, ERR_INVALID_ARG, "%s: negative size %lld in dimension %d", who,
                           (long long)shape[i], i);
        if (shape[i] && n > INT64_MAX / 8 / shape[i])
            return err_set(e, ERR_INVALID_ARG, "%s: shape too large", who);
        n *= shape[i];
    }
    *numel = n;
    return 0;
}

void tensor_set_contiguous(struct tensor *t, int ndim, const int64_t *shape)
{
    int64_t st = (int64_t)tensor_dtype_size(t->dtype);
    t->ndim = ndim;
    for (int i = ndim - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->stride[i] = st;
        st *= shape[i] ? shape[i] : 1;
    }
    for (int i = ndim; i < TENSOR_MAX_DIMS; i++) {
        t->shape[i] = 1;
        t->stride[i] = 0;
    }
}

struct tensor *tensor_on_buf(struct tensor_buf *b, enum tensor_dtype dt, int ndim,
                             const int64_t *shape, struct err *e)
{
    struct tensor *t = calloc(1, sizeof *t);
    if (!t) {
        err_set(e, ERR_NOMEM, "tensor: out of host memory");
        return NULL;
    }
    t->dtype = dt;
    tensor_set_contiguous(t, ndim, shape);
    t->data = b->data;
    t->be = b->be;
    t->buf = b;
    tensor_buf_ref(b);
    return t;
}

struct tensor *tensor_new_uninit(const struct backend *be, enum tensor_dtype dt, int ndim,
                                 const int64_t *shape, struct err *e)
{
    int64_t n;
    if (!be) {
        err_set(e, ERR_INVALID_ARG, "tensor_new: no backend");
        return NULL;
    }
    if (tensor_check_shape("tensor_new", ndim, shape, &n, e))
        return NULL;
    struct tensor_buf *b = tensor_buf_new(be, (size_t)n * tensor_dtype_size(dt), e);
    if (!b)
        return NULL;
    struct tensor *t = tensor_on_buf(b, dt, ndim, shape, e);
    tensor_buf_unref(b);
    return t;
}

struct tensor *tensor_new(const struct backend *be, enum tensor_dtype dt, int ndim,
                          const int64_t *shape, struct err *e)
{
    struct tensor *t = tensor_new_uninit(be, dt, ndim, shape, e);
    if (t && be->memset0(be, t->data, t->buf->bytes, e)) {
        tensor_free(t);
        return NULL;
    }
    return t;
}

struct tensor *tensor_wrap(const struct backend *be, void *data, enum tensor_dtype dt,
                           int ndim, const int64_t *shape, const int64_t *stride,
                           struct err *e)
{
    int64_t n;
    if (!be || (!data && ndim > 0)) {
        err_set(e, ERR_INVALID_ARG, "tensor_wrap: no backend or no memory");
        return NULL;
    }
    if (tensor_check_shape("tensor_wrap", ndim, shape, &n, e))
        return NULL;
    int64_t es = (int64_t)tensor_dtype_size(dt);
    for (int i = 0; stride && i < ndim; i++)
        if (stride[i] < 0 || stride[i] % es) {
            err_set(e, ERR_INVALID_ARG,
                    "tensor_wrap: stride %lld of dimension %d is not a non-negative "
                    "multiple of %lld bytes", (long long)stride[i], i, (long long)es);
            return NULL;
        }
    struct tensor *t = calloc(1, sizeof *t);
    if (!t) {
        err_set(e, ERR_NOMEM, "tensor: out of host memory");
        return NULL;
    }
    t->dtype = dt;
    tensor_set_contiguous(t, ndim, shape);
    for (int i = 0; stride && i < ndim; i++)
        t->stride[i] = stride[i];
    t->data = data;
    t->be = be;
    return t;
}

struct tensor *tensor_view_dup(const struct tensor *t, struct err *e)
{
    struct tensor *v = malloc(sizeof *v);
    if (!v) {
        err_set(e, ERR_NOMEM, "tensor: out of host memory");
        return NULL;
    }
    *v = *t;
    v->requires_grad = false;
    v->grad = NULL;
    v->node = NULL;
    tensor_buf_ref(v->buf);
    return v;
}

void tensor_header_contig(struct tensor *v, const struct tensor *t, int ndim,
                          const int64_t *shape)
{
    memset(v, 0, sizeof *v);
    v->dtype = t->dtype;
    v->be = t->be;
    v->data = t->data;
    v->buf = t->buf;
    tensor_set_contiguous(v, ndim, shape);
}

struct tensor *tensor_slice(const struct tensor *t, int dim, int64_t start, int64_t stop,
                            struct err *e)
{
    if (!t || dim < 0 || dim >= t->ndim || start < 0 || stop < start || stop > t->shape[dim]) {
        char s[64];
        err_set(e, ERR_INVALID_ARG, "tensor_slice: [%lld:%lld] of dimension %d of %s",
                (long long)start, (long long)stop, dim,
                t ? tensor_shape_str(t, s, sizeof s) : "NULL");
        return NULL;
    }
    struct tensor *v = tensor_view_dup(t, e);
    if (!v)
        return NULL;
    v->data += start * t->stride[dim];
    v->shape[dim] = stop - start;
    return v;
}

struct tensor *tensor_select(const struct tensor *t, int dim, int64_t index, struct err *e)
{
    if (!t || dim < 0 || dim >= t->ndim || index < 0 || index >= t->shape[dim]) {
        char s[64];
        err_set(e, ERR_INVALID_ARG, "tensor_select: index %lld of dimension %d of %s",
                (long long)index, dim, t ? tensor_shape_str(t, s, sizeof s) : "NULL");
        return NULL;
    }
    struct tensor *v = tensor_view_dup(t, e);
    if (!v)
        return NULL;
    v->data += index * t->stride[dim];
    for (int i = dim; i < t->ndim - 1; i++) {
        v->shape[i] = t->shape[i + 1];
        v->stride[i] = t->stride[i + 1];
    }
    v->ndim = t->ndim - 1;
    v->shape[v->ndim] = 1;
    v->stride[v->ndim] = 0;
    return v;
}

struct tensor *tensor_reshape_view(const struct tensor *t, int ndim, const int64_t *shape,
                                   struct err *e)
{
    int64_t n;
    char s[64];
    if (!t) {
        err_set(e, ERR_INVALID_ARG, "tensor_reshape_view: NULL tensor");
        return NULL;
    }
    if (tensor_check_shape("tensor_reshape_view", ndim, shape, &n, e))
        return NULL;
    if (n != tensor_numel(t)) {
        err_set(e, ERR_INVALID_ARG, "tensor_reshape_view: %s has %lld elements, not %lld",
                tensor_shape_str(t, s, sizeof s), (long long)tensor_numel(t), (long long)n);
        return NULL;
    }
    if (!tensor_is_contiguous(t)) {
        err_set(e, ERR_INVALID_ARG, "tensor_reshape_view: %s is not contiguous",
                tensor_shape_str(t, s, sizeof s));
        return NULL;
    }
    struct tensor *v = tensor_view_dup(t, e);
    if (v)
        tensor_set_contiguous(v, ndim, shape);
    return v;
}

void tensor_free(struct tensor *t)
{
    if (!t)
        return;
    tensor_buf_unref(t->buf);
    free(t);
}

static double load_host(const char *p, enum tensor_dtype dt)
{
    if (dt == TENSOR_F32) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    double d;
    memcpy(&d, p, sizeof d);
    return d;
}

static void store_host(char *p, enum tensor_dtype dt, double v)
{
    if (dt == TENSOR_F32) {
        float f = (float)v;
        memcpy(p, &f, sizeof f);
    } else {
        memcpy(p, &v, sizeof v);
    }
}

int tensor_item(const struct tensor *t, double *out, struct err *e)
{
    char s[64], raw[8];
    if (!t || tensor_numel(t) != 1)
        return err_set(e, ERR_INVALID_ARG, "tensor_item: %s does not have exactly one element",
                       t ? tensor_shape_str(t, s, sizeof s) : "NULL");
    if (t->be->to_host(t->be, raw, t->data, tensor_dtype_size(t->dtype), e))
        return e ? e->code : ERR_DEVICE;
    *out = load_host(raw, t->dtype);
    return 0;
}

/* Calls fn on the byte offset of every element in row-major order. */
static void for_each_offset(const struct tensor *t, void (*fn)(int64_t off, int64_t i, void *ctx),
                            void *ctx)
{
    int64_t n = tensor_numel(t), idx[TENSOR_MAX_DIMS] = {0}, off = 0;
    for (int64_t i = 0; i < n; i++) {
        fn(off, i, ctx);
        for (int d = t->ndim - 1; d >= 0; d--) {
            off += t->stride[d];
            if (++idx[d] < t->shape[d])
                break;
            off -= t->stride[d] * t->shape[d];
            idx[d] = 0;
        }
    }
}

struct host_copy {
    const struct tensor *t;
    double *host;
    bool to_host;
};

static void copy_one(int64_t off, int64_t i, void *ctx)
{
    struct host_copy *c = ctx;
    if (c->to_host)
        c->host[i] = load_host(c->t->data + off, c->t->dtype);
    else
        store_host(c->t->data + off, c->t->dtype, c->host[i]);
}

/* Device tensors go through a contiguous host staging buffer; strided ones are refused. */
static int copy_host(const struct tensor *t, double *host, bool to_host, struct err *e)
{
    const char *who = to_host ? "tensor_copy_to_host_f64" : "tensor_copy_from_host_f64";
    if (!t || !host)
        return err_set(e, ERR_INVALID_ARG, "%s: NULL argument", who);
    struct host_copy c = {t, host, to_host};
    if (t->be == be_cpu() && t->dtype == TENSOR_F64 && tensor_is_contiguous(t)) {
        size_t bytes = (size_t)tensor_numel(t) * sizeof(double);
        if (bytes)
            memcpy(to_host ? (void *)host : t->data, to_host ? t->data : (void *)host, bytes);
        return 0;
    }
    if (t->be == be_cpu()) {
        for_each_offset(t, copy_one, &c);
        return 0;
    }
    if (!tensor_is_contiguous(t))
        return err_set(e, ERR_INVALID_ARG, "%s: strided tensor on %s", who, t->be->name);
    int64_t n = tensor_numel(t);
    size_t es = tensor_dtype_size(t->dtype);
    char *stage = malloc((size_t)n * es + 1);
    if (!stage)
        return err_set(e, ERR_NOMEM, "%s: out of host memory", who);
    int rc = 0;
    if (to_host) {
        rc = t->be->to_host(t->be, stage, t->data, (size_t)n * es, e);
        for (int64_t i = 0; !rc && i < n; i++)
            host[i] = load_host(stage + i * (int64_t)es, t->dtype);
    } else {
        for (int64_t i = 0; i < n; i++)
            store_host(stage + i * (int64_t)es, t->dtype, host[i]);
        rc = t->be->from_host(t->be, t->data, stage, (size_t)n * es, e);
    }
    free(stage);
    return rc;
}

int tensor_copy_to_host_f64(const struct tensor *t, double *dst, struct err *e)
{
    return copy_host(t, dst, true, e);
}

int tensor_copy_from_host_f64(struct tensor *t, const double *src, struct err *e)
{
    return copy_host(t, (double *)src, false, e);
}

bool tensor_blas_layout(const struct tensor *t, bool *trans, int *ld)
{
    int64_t es = (int64_t)tensor_dtype_size(t->dtype);
    int64_t r = t->shape[0], c = t->shape[1], sr = t->stride[0] / es, sc = t->stride[1] / es;
    if (c == 1)
        sc = 1;                 /* the stride of a size-1 dim is never used */
    if (r == 1)
        sr = sc == 1 ? (c > 1 ? c : 1) : 1;
    if (sc == 1 && sr >= (c > 1 ? c : 1) && sr <= INT_MAX) {
        *trans = false;
        *ld = (int)sr;
        return true;
    }
    if (sr == 1 && sc >= (r > 1 ? r : 1) && sc <= INT_MAX) {
        *trans = true;
        *ld = (int)sc;
        return true;
    }
    return false;
}
