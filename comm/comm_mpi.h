/*
 * comm_mpi.h — the world of processes mpirun starts (comm_mpi_*): ranks, control messages
 * between them, and the cross-rank all-reduce of a job's replicas (comm_span_*).
 *
 * Without Open MPI in the build, or without mpirun around the process, there is no world:
 * comm_mpi_init gives NULL and traind is one process. Every wait here has a deadline, so no
 * rank is left hanging on a peer that is gone: Open MPI itself ends the world when a process
 * dies, and a peer that stops answering fails the call once its deadline passes.
 */
#ifndef TRAIND_COMM_COMM_MPI_H
#define TRAIND_COMM_COMM_MPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "tensor.h"

struct comm_mpi;

/*
 * Joins the world when mpirun started this process (*out NULL when it did not, or when the
 * build has no MPI: one process). Needs MPI_THREAD_MULTIPLE: workers reduce while the
 * control thread talks. Call once, before any thread starts.
 */
int comm_mpi_init(int *argc, char ***argv, struct comm_mpi **out, struct err *e);
/* Leaves the world (MPI_Finalize). NULL is fine. */
void comm_mpi_finalize(struct comm_mpi *c);
int comm_mpi_rank(const struct comm_mpi *c);
int comm_mpi_size(const struct comm_mpi *c);

/*
 * A control message of len bytes to rank `to`; fails (ERR_INTERNAL) when it has not gone
 * within timeout_ms. Any thread.
 */
int comm_mpi_send(struct comm_mpi *c, int to, const void *buf, size_t len, int64_t timeout_ms,
                  struct err *e);
/*
 * The next control message from any rank, waiting up to wait_ms (0: only look): *buf (malloc'd,
 * NUL-terminated after its *len bytes, the caller frees it) and *from; *buf NULL when none came.
 */
int comm_mpi_recv(struct comm_mpi *c, int *from, char **buf, size_t *len, int64_t wait_ms,
                  struct err *e);

/*
 * A job's replicas on several ranks: this process's part of them (comm_span). ranks are the
 * processes taking part, in the order of their replicas (each holds a contiguous run of them);
 * me is this process's index in ranks; tag tells this run's messages from every other's
 * (1 .. comm_mpi_max_tag); a collective waits at most timeout_ms for the others.
 */
struct comm_span;

int comm_mpi_max_tag(const struct comm_mpi *c);
int comm_span_new(struct comm_mpi *c, const int *ranks, int n, int me, int tag, int64_t timeout_ms,
                  struct comm_span **out, struct err *e);
/* The span must be in no call. NULL is fine. */
void comm_span_free(struct comm_span *s);

/*
 * Every process passes its partial sum (count elements of dt, the same count everywhere);
 * each ends holding ((p0 + p1) + p2) + ... over the processes in span order: the same bits on
 * every rank and in every run. Once the span has ended it fails: ERR_CANCELLED after a
 * comm_span_abort here, a peer's code and words after its abort, ERR_INTERNAL past the deadline
 * or on an MPI failure; every later call fails alike.
 *
 * Successive calls (a gradient's buckets, then the loss) match the peers' calls in the order
 * each process makes them, so every process must make the same calls in the same order, one
 * at a time: from any thread, but never two at once (a second call while one is in progress
 * ends the span, ERR_INTERNAL).
 */
int comm_span_allreduce(struct comm_span *s, void *buf, size_t count, enum tensor_dtype dt,
                        struct err *e);

/*
 * Whether the span has ended (an abort here, a peer's notice, which this looks for, a deadline or
 * a failure); why then gets its words. For a thread that waits on something else for the span's
 * peers (an NCCL collective of GPU replicas): at most one thread at a time, and none while
 * another is in comm_span_allreduce. NULL: false.
 */
bool comm_span_ended(struct comm_span *s, char *why, size_t cap);

/*
 * Whether a collective of s passed its deadline or failed in MPI: a peer hung or its process is
 * gone, rather than failed or left on its own.
 */
bool comm_span_timed_out(const struct comm_span *s);

/*
 * Ends the span here (a call waiting here fails with ERR_CANCELLED) and tells its peers, whose
 * calls then fail with code and why: any thread, any time. NULL is fine.
 */
void comm_span_abort(struct comm_span *s, int code, const char *why);

#endif
