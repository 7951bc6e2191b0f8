/* tensor.h — strided n-d tensors (float32/float64, up to 4-D) over backend-owned memory. */
#ifndef TRAIND_CORE_TENSOR_H
#define TRAIND_CORE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define TENSOR_MAX_DIMS 4

enum tensor_dtype { TENSOR_F32, TENSOR_F64 };

struct backend;
struct ag_node;
struct tensor_buf;

/*
 * A tensor is a view: shape and byte strides over a buffer that may be shared
 * with other views (tensor_buf is reference counted; NULL for borrowed memory).
 * Strides are in bytes, as in ggml, so a column slice of a row-major batch
 * (`batch[:, 1:]`) is a tensor like any other and no copy is made.
 * A tensor belongs to one thread at a time; nothing here is locked.
 */
struct tensor {
    enum tensor_dtype dtype;
    int ndim;                          /* 0 (a scalar) .. TENSOR_MAX_DIMS */
    int64_t shape[TENSOR_MAX_DIMS];
    int64_t stride[TENSOR_MAX_DIMS];   /* bytes */
    char *data;                        /* address of element [0,...,0] */
    const struct backend *be;          /* where the memory lives */
    struct tensor_buf *buf;            /* owner of the memory, or NULL if borrowed */

    /* autograd */
    bool requires_grad;
    struct tensor *grad;               /* same shape, contiguous; accumulated by ag_backward */
    struct ag_node *node;              /* the op that made this tensor on a tape, or NULL */
};

size_t tensor_dtype_size(enum tensor_dtype dt);
const char *tensor_dtype_name(enum tensor_dtype dt);   /* "float32", "float64" */
int tensor_dtype_parse(const char *name, enum tensor_dtype *out); /* 0 or ERR_INVALID_ARG */

int64_t tensor_numel(const struct tensor *t);
bool tensor_is_contiguous(const struct tensor *t);
/* "(1048576, 8)" into buf; returns buf. */
const char *tensor_shape_str(const struct tensor *t, char *buf, size_t cap);

/* A new contiguous, zero-filled tensor on backend be. NULL and e set on failure. */
struct tensor *tensor_new(const struct backend *be, enum tensor_dtype dt, int ndim,
                          const int64_t *shape, struct err *e);

/*
 * Borrow memory someone else owns (a batch slot of the prefetch ring, a flat
 * parameter buffer). stride == NULL means contiguous row-major. The memory must
 * outlive the tensor.
 */
struct tensor *tensor_wrap(const struct backend *be, void *data, enum tensor_dtype dt,
                           int ndim, const int64_t *shape, const int64_t *stride,
                           struct err *e);

/* Views share memory with t (and keep its buffer alive). */
struct tensor *tensor_slice(const struct tensor *t, int dim, int64_t start, int64_t stop,
                            struct err *e);            /* t[..., start:stop, ...] */
struct tensor *tensor_select(const struct tensor *t, int dim, int64_t index,
                             struct err *e);           /* t[..., index, ...]: drops dim */
struct tensor *tensor_reshape_view(const struct tensor *t, int ndim, const int64_t *shape,
                                   struct err *e);     /* contiguous t only */

/*
 * How BLAS (or cuBLAS) can read a 2-D view without a copy: row-major with leading
 * dimension *ld (unit column stride, *trans false), or stored transposed (unit row
 * stride, *trans true). False when neither holds (a broadcast or 2-D strided view),
 * and the caller copies to a contiguous temporary first.
 */
bool tensor_blas_layout(const struct tensor *t, bool *trans, int *ld);

/* Frees the tensor (not its grad, which belongs to whoever allocated it). NULL is fine. */
void tensor_free(struct tensor *t);

/* Reads the single element of a tensor with numel 1 as a double (copies from a device). */
int tensor_item(const struct tensor *t, double *out, struct err *e);

/* Host <-> tensor copies of all elements, in row-major order, converting dtype. */
int tensor_copy_to_host_f64(const struct tensor *t, double *dst, struct err *e);
int tensor_copy_from_host_f64(struct tensor *t, const double *src, struct err *e);

#endif
