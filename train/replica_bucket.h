/*
 * replica_bucket.h — train-internal: one rank's gradient all-reduced in buckets while its
 * backward runs, as PyTorch's DistributedDataParallel does, on a comm thread of the rank's
 * (host memory), or queued on the device from the rank's own thread (GPUs).
 *
 * The flat gradient is cut from its end into buckets of `elems` elements (the first, at the
 * buffer's head, may be shorter): bucket 0 is the tail, which backward completes first.
 * Every rank reduces the same buckets in the same order, each by the reduce function its
 * owner gives (the world's all-reduce: in-process, then across processes), whose sums are
 * element-wise in a fixed order: so the result is the whole buffer's all-reduce to the bit,
 * however it is cut.
 */
#ifndef TRAIND_TRAIN_REPLICA_BUCKET_H
#define TRAIND_TRAIN_REPLICA_BUCKET_H

#include <stddef.h>

#include "err.h"
#include "tensor.h"

struct rbucket;
struct nn_model;

struct backend;

/*
 * Sums buf (count elements of dt, on be's device) over the world, as rank, on the comm
 * thread: every rank's comm thread calls it for the same buckets in the same order. Returns
 * once every rank's buf holds the sum, or fails (ERR_CANCELLED when the world ended); it must
 * not wait without a deadline, nor once the world has ended. A queued bucketer's (below) only
 * queues the sum, on the rank's thread, and returns.
 */
typedef int (*rbucket_reduce_fn)(void *ctx, int rank, const struct backend *be, void *buf, size_t count,
                                 enum tensor_dtype dt, struct err *e);

/* Rank's bucketer, reducing with reduce(ctx, rank, ...); its comm thread starts here. ERR_NOMEM, ERR_INTERNAL. */
int rbucket_new(rbucket_reduce_fn reduce, void *ctx, int rank, struct rbucket **out, struct err *e);

/*
 * A bucketer without a thread, for a device whose streams order the work (GPUs): rbucket_ready
 * scales and hands each completed bucket to reduce on the calling thread, which queues its
 * all-reduce; the owner waits for them after rbucket_finish. ERR_NOMEM.
 */
int rbucket_new_queued(rbucket_reduce_fn reduce, void *ctx, int rank, struct rbucket **out, struct err *e);
/* Stops its thread: no step may be in progress. NULL is fine. */
void rbucket_free(struct rbucket *b);

/* A step on m's flat gradient, each bucket scaled by weight before its all-reduce. */
void rbucket_begin(struct rbucket *b, struct nn_model *m, double weight, size_t elems);

/* nn_grads_ready_fn: the gradient's elements [from, end) are complete; their buckets go. */
void rbucket_ready(void *b, size_t from);

/*
 * Once the whole gradient is ready: waits until every bucket is reduced; *buckets their
 * count, *hidden_s the comm thread's seconds in them less this wait (the part backward
 * hid; 0 for a queued bucketer, whose host sees no time of the device's). Fails with the
 * first failed bucket's error (ERR_CANCELLED when the world ended).
 */
int rbucket_finish(struct rbucket *b, int *buckets, double *hidden_s, struct err *e);

#endif
