/* ag_impl.h — core-internal: how ops record nodes on the tape and find gradient buffers. */
#ifndef TRAIND_CORE_AG_IMPL_H
#define TRAIND_CORE_AG_IMPL_H

#include "autograd.h"

struct ag_node;
typedef int (*ag_backward_fn)(struct ag_tape *tp, struct ag_node *n, struct err *e);

#define AG_MAX_IN 4

/* One recorded op: its output, inputs (NULL past nin), its gradient rule and what the rule
 * needs besides them (an op variant, a scalar, a tensor saved by the forward). */
struct ag_node {
    const char *name;
    ag_backward_fn backward;
    struct tensor *out;
    struct tensor *in[AG_MAX_IN];
    int nin;
    int kind;
    double arg;
    struct tensor *saved;   /* owned by the tape, like out */
};

/*
 * A new contiguous result, contents undefined. With a tape its memory comes from
 * the tape's pool (buffers of last step are reused, so a training step allocates
 * nothing after the first); without one the caller owns it.
 */
struct tensor *ag_new_result(struct ag_tape *tp, const struct backend *be, enum tensor_dtype dt,
                             int ndim, const int64_t *shape, struct err *e);

/*
 * Hands out (a result from ag_new_result or a view) to the tape and, when an input
 * requires grad, records the node. With tp NULL it does nothing. On failure out is
 * freed and NULL returned.
 */
struct tensor *ag_record(struct ag_tape *tp, struct tensor *out, const char *name,
                         ag_backward_fn fn, struct tensor *a, struct tensor *b, struct err *e);

/* ag_record for up to AG_MAX_IN inputs (NULL entries allowed); returns the node through *node
 * when one was recorded (else NULL) so the caller can fill kind/arg/saved. */
struct tensor *ag_record_n(struct ag_tape *tp, struct tensor *out, const char *name,
                           ag_backward_fn fn, struct tensor *const *in, int nin,
                           struct ag_node **node, struct err *e);

/*
 * Where a gradient rule writes t's gradient: *g = t->grad, allocated on the tape for a
 * non-leaf seen for the first time (then *beta = 0: overwrite, else 1: accumulate).
 */
int ag_grad_dst(struct ag_tape *tp, struct tensor *t, struct tensor **g, double *beta,
                struct err *e);

/*
 * For a non-leaf t whose gradient does not exist yet: make it a view of src (same
 * numel, contiguous) instead of a copy. Each node may alias at most one input.
 * Returns true when it did.
 */
bool ag_grad_alias(struct ag_tape *tp, struct tensor *t, const struct tensor *src,
                   struct err *e);

#endif
