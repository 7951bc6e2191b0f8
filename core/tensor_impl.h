/* tensor_impl.h — core-internal: the reference-counted buffer behind tensors and view helpers. */
#ifndef TRAIND_CORE_TENSOR_IMPL_H
#define TRAIND_CORE_TENSOR_IMPL_H

#include "tensor.h"

/* Memory on one backend, shared by every view of it. */
struct tensor_buf {
    int refs;
    const struct backend *be;
    void *data;
    size_t bytes;
};

struct tensor_buf *tensor_buf_new(const struct backend *be, size_t bytes, struct err *e);
void tensor_buf_ref(struct tensor_buf *b);
void tensor_buf_unref(struct tensor_buf *b);

/* Checks ndim and shape and returns numel in *numel (ERR_INVALID_ARG on nonsense or overflow). */
int tensor_check_shape(const char *who, int ndim, const int64_t *shape, int64_t *numel,
                       struct err *e);

/* Sets t's shape with contiguous row-major strides. */
void tensor_set_contiguous(struct tensor *t, int ndim, const int64_t *shape);

/* A contiguous tensor over buffer b (takes a reference), data not initialised. */
struct tensor *tensor_on_buf(struct tensor_buf *b, enum tensor_dtype dt, int ndim,
                             const int64_t *shape, struct err *e);

/* A new contiguous tensor whose contents are not initialised (op outputs). */
struct tensor *tensor_new_uninit(const struct backend *be, enum tensor_dtype dt, int ndim,
                                 const int64_t *shape, struct err *e);

/* A heap header copying t's view (shares and references its buffer), with no autograd state. */
struct tensor *tensor_view_dup(const struct tensor *t, struct err *e);

/* Fills v (a stack header, never freed) with t's memory seen under a contiguous shape. */
void tensor_header_contig(struct tensor *v, const struct tensor *t, int ndim,
                          const int64_t *shape);

#endif
