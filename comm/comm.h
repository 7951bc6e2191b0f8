/* comm.h — the replicas' collectives: an in-process world of N replica threads and its all-reduce, on the host or (NCCL) on GPUs. */
#ifndef TRAIND_COMM_COMM_H
#define TRAIND_COMM_COMM_H

#include <stddef.h>

#include <stdbool.h>

#include "err.h"
#include "tensor.h"

struct backend;

enum comm_op {
    COMM_SUM,   /* every buffer ends holding the element-wise sum */
    COMM_MEAN,  /* the sum divided by the number of replicas */
};

/*
 * N data-parallel replicas in one process, one thread each, each with its own flat
 * buffer (gradients, as core keeps them). Ranks are 0..n-1; each thread uses one rank.
 * The same world serves any number of successive collectives.
 */
struct comm_local;

/* A world of n >= 1 replicas. ERR_INVALID_ARG for n < 1, ERR_NOMEM, ERR_INTERNAL (pthread). */
int comm_local_new(int n, struct comm_local **out, struct err *e);

/* Frees the world; no thread may be inside a call on it. NULL is fine. */
void comm_local_free(struct comm_local *c);

int comm_local_size(const struct comm_local *c);

/*
 * Called by every rank with its own buffer of `count` elements of dtype dt (every rank
 * passes the same count, dtype and op); returns once every rank's buffer holds the result.
 * The result is the same to the bit on every rank and does not depend on thread timing:
 * each element is summed in rank order, ((b0 + b1) + b2) + ..., in the buffer's own dtype,
 * then for COMM_MEAN divided by n. So a run's losses repeat exactly.
 *
 * Fails with ERR_CANCELLED, the message naming why, once the world is aborted (by
 * comm_local_abort, by a timeout, or by a rank that passed arguments unlike the others');
 * the caller's buffer is then unspecified. No rank ever reads or writes a peer's buffer:
 * each copies its own into memory of the world's (freed with it), so a call that fails
 * returns at once, whatever its peers are doing. ERR_INVALID_ARG for a bad rank or dtype,
 * or arguments that differ between ranks (which also aborts the world, so the others do
 * not wait forever); ERR_NOMEM.
 */
int comm_local_allreduce(struct comm_local *c, int rank, void *buf, size_t count,
                         enum tensor_dtype dt, enum comm_op op, struct err *e);

/*
 * A rank that waits in a collective more than seconds (> 0; 0, the default: no limit) for a
 * peer that has not come aborts the world, its reason naming the absent ranks: every rank's
 * call then fails as after comm_local_abort. Any thread.
 */
void comm_local_set_timeout(struct comm_local *c, double seconds);

/* The lowest rank that a timed-out wait was for, or -1 (none timed out). Any thread; never waits. */
int comm_local_missing(struct comm_local *c);

/*
 * Fails the current collective and every later one for all ranks, with `why` in their
 * messages: a replica that cannot go on calls this instead of the collective, so its
 * peers get an error rather than wait forever. The first reason given is kept. Safe from
 * any thread. ERR_INTERNAL if a pthread call fails, else ERR_OK.
 */
int comm_local_abort(struct comm_local *c, const char *why);

/*
 * N data-parallel replicas in one process (or in several: comm_dev_new_span), one thread and
 * one GPU each, whose buffers are device memory: NCCL's all-reduce (comm/comm_nccl.c), queued on each rank's compute stream,
 * which core's backend table hands over (backend.h, native_stream), so comm/ sees no gpu/
 * header and gpu/ no NCCL. NCCL is opened with dlopen on first use, as cuBLAS is: traind
 * starts without it. Built without NCCL (-Dnccl=disabled, or no NCCL beside the CUDA
 * toolkit), comm/comm_dev_none.c stands in and every call but new/free fails.
 *
 * No call waits without a deadline: NCCL's communicators are made non-blocking, and a rank
 * polls its stream and ncclCommGetAsyncError until the collective is done, the timeout
 * passes (the world is then aborted, its reason naming the absent ranks, as comm_local's
 * is) or a peer aborts the world; a rank that stops waiting aborts its communicator.
 */
struct comm_dev;

/* Whether device worlds can work here: NCCL built in and loadable; else false, e saying why. */
bool comm_dev_available(struct err *e);

/* A world of n >= 1 device ranks; NCCL is not touched until a rank's first collective. */
int comm_dev_new(int n, struct comm_dev **out, struct err *e);

/* The bytes of an NCCL unique id (ncclUniqueId), which joins ranks of several processes. */
#define COMM_DEV_ID_BYTES 128

/*
 * A unique id for a world spanning processes, made here (NCCL loaded, ncclGetUniqueId): the
 * process that makes it must outlive the world's making, since NCCL's bootstrap listens in it.
 * ERR_DEVICE when NCCL is missing or fails.
 */
int comm_dev_make_id(unsigned char id[COMM_DEV_ID_BYTES], struct err *e);

/*
 * This process's n ranks of a world of total device ranks spread over processes: they are the
 * world's ranks offset .. offset + n - 1 (the calls here still number them 0 .. n - 1), and
 * every process's ranks join with the same id (comm_dev_make_id, made by one of them and sent
 * to the others). A peer process that ends the world while this one waits inside NCCL says so
 * through watch (comm_mpi.h's span of the same ranks, not owned), which rank 0 here looks at
 * between polls (comm_span_ended): the world is then aborted here too, as by comm_dev_abort.
 * As comm_dev_new otherwise; ERR_INVALID_ARG for offsets outside total.
 */
struct comm_span;
int comm_dev_new_span(int n, int offset, int total, const unsigned char id[COMM_DEV_ID_BYTES],
                      struct comm_span *watch, struct comm_dev **out, struct err *e);

/* Frees the world; every rank must have called comm_dev_leave (or never reduced). NULL is fine. */
void comm_dev_free(struct comm_dev *c);

/*
 * Called by every rank, on the thread that drives be (a GPU backend; its device is made
 * current), with its own device buffer of count elements of dt (the same count and dtype
 * on every rank): returns once buf holds the sum over the ranks on this rank's device. The
 * first call joins the rank to the world (ncclCommInitRankConfig; the unique id is made by
 * the first rank to come and shared in-process, or was given to comm_dev_new_span). The sum
 * is over every process's ranks of the world; its order is NCCL's, so ranks agree
 * to the bit but the sum may round unlike comm_local's rank order. Failures: ERR_CANCELLED
 * once the world is aborted (comm_dev_abort, a timeout), ERR_DEVICE for an NCCL error,
 * ERR_INVALID_ARG for a bad rank or dtype (which also aborts the world).
 */
int comm_dev_allreduce(struct comm_dev *c, int rank, const struct backend *be, void *buf,
                       size_t count, enum tensor_dtype dt, struct err *e);

/*
 * The same all-reduce of one bucket of a gradient, queued while backward goes on: called on
 * the rank's thread once the compute stream has been given the bucket's last gradient kernel,
 * it queues NCCL on the backend's side stream (backend.h, side_stream), after an event
 * recorded on the compute stream now, and returns without waiting for peers. Every rank
 * queues the same buckets (counts, dtype) in the same order. Fails as comm_dev_allreduce.
 */
int comm_dev_allreduce_start(struct comm_dev *c, int rank, const struct backend *be, void *buf,
                             size_t count, enum tensor_dtype dt, struct err *e);

/*
 * After rank's last comm_dev_allreduce_start of a step: the compute stream's later work waits
 * for the side stream's buckets, and the call returns once they are done, under the deadline
 * as comm_dev_allreduce polls (a peer's abort, a peer process's end, a timeout). 0 at once when
 * nothing was queued. Fails as comm_dev_allreduce.
 */
int comm_dev_allreduce_end(struct comm_dev *c, int rank, const struct backend *be, struct err *e);

/* As comm_local_set_timeout: a wait longer than seconds (> 0; 0: no limit) aborts the world. */
void comm_dev_set_timeout(struct comm_dev *c, double seconds);

/* The lowest rank a timed-out wait was for, or -1. Any thread. */
int comm_dev_missing(struct comm_dev *c);

/* Whether a wait passed the timeout (in a world spanning processes, a peer process may be the one late). */
bool comm_dev_timed_out(struct comm_dev *c);

/* As comm_local_abort: every rank's current and later collective fails; the first reason stays. */
int comm_dev_abort(struct comm_dev *c, const char *why);

/*
 * Rank is done with the world: its communicator is finalized and destroyed (aborted if the
 * world was, or if finalizing outlasts the timeout). On the rank's thread, before its
 * backend is destroyed. A rank that never reduced has nothing to do.
 */
void comm_dev_leave(struct comm_dev *c, int rank);

#endif
