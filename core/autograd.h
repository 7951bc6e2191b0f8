/* autograd.h — the tape: ops record themselves in creation order; backward walks it in reverse. */
#ifndef TRAIND_CORE_AUTOGRAD_H
#define TRAIND_CORE_AUTOGRAD_H

#include "tensor.h"

struct ag_tape;

/*
 * Every op (ops.h) takes a tape. With a tape, the op records a node holding what
 * its gradient rule needs and the result is owned by the tape; with NULL it runs
 * without recording (evaluation, /predict) and the caller frees the result.
 */
struct ag_tape *ag_tape_new(struct err *e);
void ag_tape_free(struct ag_tape *tp);

/* Frees every tensor and node recorded since the last reset; leaves parameters alone. */
void ag_tape_reset(struct ag_tape *tp);

/*
 * Gradient of the scalar `loss` (numel 1) with respect to every tensor on the
 * tape with requires_grad, accumulated (+=) into their ->grad, as PyTorch does.
 * Leaves need ->grad allocated (nn.h does this in the flat gradient buffer).
 */
int ag_backward(struct ag_tape *tp, struct tensor *loss, struct err *e);

/*
 * ag_backward that calls done(ctx, leaf) for each leaf (a tensor with ->grad and no node: a
 * parameter) once its gradient is complete, as soon as the walk has passed the last node that
 * adds to it (the earliest recorded that takes it), so a caller can ship that part of the
 * gradient while backward goes on (data-parallel replicas, train/replica.h). A leaf no node
 * takes is never named. done's failure ends the walk with its error.
 */
typedef int (*ag_leaf_done_fn)(void *ctx, struct tensor *leaf, struct err *e);
int ag_backward_notify(struct ag_tape *tp, struct tensor *loss, ag_leaf_done_fn done, void *ctx,
                       struct err *e);

#endif
