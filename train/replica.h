/*
 * replica.h — data-parallel replicas of one job in one process (train_world_*): N ranks, each
 * a train_run on its own thread and device, that train one model as one run would.
 *
 * Every rank reads the same global batches in the same order and takes its share of each:
 * N contiguous runs of rows whose sizes differ by at most one. A rank's gradient (the mean
 * over its share) is weighted by share / batch and the weighted gradients are summed, in rank
 * order, into every rank's flat gradient buffer (comm/'s all-reduce), so each holds the global
 * batch's mean gradient to rounding; clipping and the optimizer then run alike everywhere and
 * the parameters stay equal without being sent. The loss is summed the same way. Replicas
 * on GPUs sum the gradients with NCCL on their devices (comm.h's comm_dev, in NCCL's order,
 * so every rank still gets the same bits) and the loss, a host number, as CPU replicas do.
 *
 * Rank 0 speaks for the job: only it sees stop requests, writes metrics rows and checkpoints.
 * Every rank evaluates its share of each data.test batch, and the partial sums are summed as
 * the loss is (replica_sum), so every rank gets the eval loss a single run would. A rank that
 * leaves early (a stop on rank 0, a failure anywhere, in a step or an evaluation) ends the
 * world: its peers' next collective fails, and they leave too. The first failure is kept, so
 * rank 0 reports the failing rank's error as the job's.
 */
#ifndef TRAIND_TRAIN_REPLICA_H
#define TRAIND_TRAIN_REPLICA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct train_world;
struct nn_model;
struct ag_tape;
struct tensor;

/* A world of n >= 1 ranks. ERR_INVALID_ARG for n < 1, ERR_NOMEM, ERR_INTERNAL. */
int train_world_new(int n, struct train_world **out, struct err *e);
/*
 * The part of a world of total ranks that runs in this process: ranks [offset, offset + n),
 * the other processes' reached through span (comm_mpi.h; owned from here on, freed with the
 * world, also on failure). Every process's part sums its ranks first, then the processes' sums
 * are added in span order: the same bits everywhere. train_world_size is total.
 */
struct comm_span;
int train_world_new_span(int n, int offset, int total, struct comm_span *span, struct train_world **out,
                         struct err *e);
/*
 * Such a part whose replicas are GPUs: their gradients are summed by one NCCL communicator of
 * all total ranks (comm_dev_new_span), which id (comm_dev_make_id, made by one process and
 * sent to the others) joins; the loss still goes through span. Before any rank runs.
 */
int train_world_span_gpus(struct train_world *w, const unsigned char *id, struct err *e);
/* Whether a collective across processes passed its deadline or lost a peer's process (comm_span_timed_out). */
bool train_world_timed_out(const struct train_world *w);
/* No rank may still be in train_run. NULL is fine. */
void train_world_free(struct train_world *w);
int train_world_size(const struct train_world *w);

/* The rows [*lo, *lo + *count) of a batch of rows that rank takes of n. */
void replica_share(size_t rows, int rank, int n, size_t *lo, size_t *count);

/*
 * Rank's backward of loss (its share's; NULL for an empty share), as PyTorch's
 * DistributedDataParallel runs it: when m's flat gradient is larger than bucket_bytes (> 0),
 * its buckets of that size, from the tail, are all-reduced (weighted, as replica_reduce does)
 * while backward computes the earlier layers: in host memory on a thread of the rank's (with a
 * span, each bucket in-process then across the processes), on GPUs queued by NCCL on the
 * device's side stream; replica_reduce then waits for the last. Else a plain backward, the
 * gradient reduced whole afterwards. The gradient ends the same to the bit either way (on more
 * than 2 real GPUs, to NCCL's rounding: its order depends on where an element lies). A
 * backward that fails once buckets are under way ends the world (replica_leave) and waits for
 * the rank's thread before it returns.
 */
int replica_backward(struct train_world *w, int rank, struct nn_model *m, struct ag_tape *tp,
                     struct tensor *loss, double weight, size_t bucket_bytes, struct err *e);

/*
 * After rank's replica_backward (or a plain backward) over its share of a batch (weight = share / batch rows, *loss its
 * share's mean loss): m's gradients and *loss become the batch's on every rank. When the
 * world has ended, fails with the error of the rank that ended it, its rank named.
 */
int replica_reduce(struct train_world *w, int rank, struct nn_model *m, double weight, double *loss,
                   struct err *e);

/*
 * The sum over the ranks of rank's n host numbers v (float64), into v on every rank: the
 * path replica_reduce sums the loss by, in the same order (an evaluation's partial sums).
 * Rank counts as waiting for its peers meanwhile (train_world_waiting). When the world has
 * ended, fails with the error of the rank that ended it, its rank named.
 */
int replica_sum(struct train_world *w, int rank, double *v, size_t n, struct err *e);

/*
 * Rank leaves before the end, for reason e (ERR_CANCELLED: a stop): the world ends. Any thread
 * may call it for a rank, so a supervisor can end the world of a rank that stopped answering:
 * peers waiting in a collective for it are released with its error.
 */
void replica_leave(struct train_world *w, int rank, const struct err *e);

/*
 * Rank's run is over (whatever its outcome): what it holds of the world on its device (an
 * NCCL communicator) is given back. On the rank's thread, before its backend goes.
 */
void replica_done(struct train_world *w, int rank);

/* What a rank has done so far, for spotting a straggler: any thread, at any time. */
struct replica_stats {
    int64_t iterations;         /* steps done */
    double step_last, step_max, step_median; /* seconds of a step (the median of the last 64) */
    double data_wait_s;         /* waiting for the prefetch thread, in all */
    double reduce_s;            /* in replica_reduce, in all: summing, and waiting for the slowest peer */
    /*
     * Seconds of a step spent getting to the all-reduce (waiting for data, forward, backward:
     * the step and its wait less the time in replica_reduce), the median of the last
     * REPLICA_STRAGGLER_STEPS; 0 until that many. Every rank's step takes the slowest's time,
     * since all wait for it in the all-reduce; this figure is the rank's own.
     */
    double work_median;
    int buckets;                /* all-reduces the gradient took in the latest step: 1 when whole */
    double reduce_hidden_s;     /* in bucket all-reduces while backward ran, in all (not in reduce_s) */
};

/* Rank's step took step_s seconds after waiting wait_s for its batch (the runner calls it). */
void train_world_note_step(struct train_world *w, int rank, double step_s, double wait_s);
void train_world_stats(struct train_world *w, int rank, struct replica_stats *out);
/* What rank, of another process, last reported of itself (train_world_stats then gives it). */
void train_world_report(struct train_world *w, int rank, const struct replica_stats *st);

/*
 * A straggler: a rank whose work_median is more than REPLICA_STRAGGLER_RATIO times the median
 * of the other ranks' work_median, once every rank has done REPLICA_STRAGGLER_STEPS steps. So
 * more than half of its last 32 steps were slow, and one slow step (a page fault, a checkpoint
 * write on rank 0) is not enough.
 */
#define REPLICA_STRAGGLER_STEPS 32
#define REPLICA_STRAGGLER_RATIO 1.5

/*
 * Of n ranks' work medians (seconds, > 0): the rank with the highest ratio of its median to
 * the median of the others' (for an even count, the mean of the middle two), if that ratio
 * is above REPLICA_STRAGGLER_RATIO, its ratio in *ratio; else -1. n < 2: -1.
 */
int replica_straggler(const double *work_median, int n, double *ratio);

/* The world's straggler now (replica_straggler over its ranks' figures), or -1. Any thread. */
int train_world_straggler(struct train_world *w, double *ratio);

/*
 * Every collective that waits more than seconds for a peer fails for every rank (comm.h's
 * comm_local_set_timeout); 0: no limit. Before the ranks start.
 */
void train_world_set_timeout(struct train_world *w, double seconds);

/* The rank an all-reduce waited for in vain (the world ended for it), or -1. Any thread. */
int train_world_lost(struct train_world *w);

/* Whether the world has ended (a rank left, or a collective timed out). Any thread. */
bool train_world_ended(struct train_world *w);

/* Whether rank waits in replica_reduce now (for its peers: it is not the one stuck). Any thread. */
bool train_world_waiting(struct train_world *w, int rank);

#endif
