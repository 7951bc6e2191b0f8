/*
 * replica_bucket.h — train-internal: one rank's gradient all-reduced in buckets while its
 * backward runs, as PyTorch's DistributedDataParallel does, on a comm thread of the rank's.
 *
 * The flat gradient is cut from its end into buckets of `elems` elements (the first, at the
 * buffer's head, may be shorter): bucket 0 is the tail, which backward completes first.
 * Every rank reduces the same buckets in the same order, each by comm/'s all-reduce, whose
 * sums are element-wise in rank order: so the result is the whole buffer's all-reduce to the
 * bit, however it is cut.
 */
#ifndef TRAIND_TRAIN_REPLICA_BUCKET_H
#define TRAIND_TRAIN_REPLICA_BUCKET_H

#include <stddef.h>

#include "comm.h"
#include "err.h"

struct rbucket;
struct nn_model;

/* Rank's bucketer on world c; its comm thread starts here. ERR_NOMEM, ERR_INTERNAL. */
int rbucket_new(struct comm_local *c, int rank, struct rbucket **out, struct err *e);
/* Stops its thread: no step may be in progress. NULL is fine. */
void rbucket_free(struct rbucket *b);

/* A step on m's flat gradient, each bucket scaled by weight before its all-reduce. */
void rbucket_begin(struct rbucket *b, struct nn_model *m, double weight, size_t elems);

/* nn_grads_ready_fn: the gradient's elements [from, end) are complete; their buckets go. */
void rbucket_ready(void *b, size_t from);

/*
 * Once the whole gradient is ready: waits until every bucket is reduced; *buckets their
 * count, *hidden_s the comm thread's seconds in them less this wait (the part backward
 * hid). Fails with the first failed bucket's error (ERR_CANCELLED when the world ended).
 */
int rbucket_finish(struct rbucket *b, int *buckets, double *hidden_s, struct err *e);

#endif
