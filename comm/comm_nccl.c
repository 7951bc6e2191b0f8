/* comm_nccl.c — all-reduce among replica threads of one process whose buffers are on GPUs: NCCL, polled under a deadline. */
#include "comm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "comm_mpi.h"
#include "nccl_fn.h"

/*
 * One communicator a rank, made on the rank's own thread (its device current) from a unique
 * id that the first rank to come makes and the others copy from the world; a world spanning
 * processes is given its id instead (comm_dev_new_span), made by one process and sent to
 * the others, and its ranks here are the world's offset + 0 .. n - 1 of total.
 * Communicators are non-blocking (ncclConfig_t.blocking = 0): their init and the enqueue of
 * a collective return ncclInProgress at once, and the rank polls ncclCommGetAsyncError,
 * then an event recorded on its compute stream after the collective, until done. Between
 * polls it looks at the world: aborted by a peer, or past the deadline, it aborts its own
 * communicator (ncclCommAbort: NCCL's way out of a collective that will never finish) and
 * returns. A gradient's buckets (comm_dev_allreduce_start) are queued on the backend's side
 * stream instead, each after an event of the compute stream, and polled once, at the step's
 * end (comm_dev_allreduce_end), through an event recorded on the side stream.
 */
struct comm_dev {
    int n;                          /* this process's ranks */
    int offset, total;              /* they are the world's offset .. offset + n - 1 of total */
    pthread_mutex_t mu;
    struct comm_nccl_fn fn;
    bool loaded;
    bool have_id;
    ncclUniqueId id;
    /* by rank; a rank's own entries are touched by its thread only, but for entered */
    ncclComm_t *comm;               /* NULL until it joins, and once it has left or aborted */
    struct be_event **ev;           /* recorded after each collective, or after a step's buckets */
    struct be_event **ready;        /* a bucket's gradient is complete: recorded on compute, waited on side */
    bool *queued;                   /* buckets queued on the side stream since the last allreduce_end */
    bool *enqueuing;                /* the last bucket's ncclAllReduce returned ncclInProgress */
    const struct backend **be;      /* its backend, for the event */
    unsigned long *entered;         /* collectives begun; a peer with fewer is the one waited for */
    bool aborted;
    char why[200];
    double timeout_s;               /* the longest wait; 0: no limit */
    int missing;                    /* the lowest rank a timed-out wait was for; -1: none */
    bool late;                      /* a wait passed the timeout */
    struct comm_span *watch;        /* the other processes' word that the world ended; NULL: none */
};

_Static_assert(sizeof(ncclUniqueId) == COMM_DEV_ID_BYTES, "comm.h's COMM_DEV_ID_BYTES is NCCL's id");

/* Whether NCCL loads, found out once: the scheduler asks at every placement. */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static struct err probe_err;

static void probe(void)
{
    struct comm_nccl_fn fn;
    comm_nccl_load(&fn, &probe_err);
}

bool comm_dev_available(struct err *e)
{
    pthread_once(&probe_once, probe);
    if (probe_err.code)
        *e = probe_err;
    return probe_err.code == ERR_OK;
}

int comm_dev_new(int n, struct comm_dev **out, struct err *e)
{
    *out = NULL;
    if (n < 1)
        return err_set(e, ERR_INVALID_ARG, "comm: a world needs at least 1 replica, not %d", n);
    struct comm_dev *c = calloc(1, sizeof *c);
    if (c) {
        c->comm = calloc((size_t)n, sizeof *c->comm);
        c->ev = calloc((size_t)n, sizeof *c->ev);
        c->be = calloc((size_t)n, sizeof *c->be);
        c->entered = calloc((size_t)n, sizeof *c->entered);
        c->ready = calloc((size_t)n, sizeof *c->ready);
        c->queued = calloc((size_t)n, sizeof *c->queued);
        c->enqueuing = calloc((size_t)n, sizeof *c->enqueuing);
    }
    if (!c || !c->comm || !c->ev || !c->be || !c->entered || !c->ready || !c->queued || !c->enqueuing) {
        if (c)
            free(c->comm), free(c->ev), free(c->be), free(c->entered), free(c->ready), free(c->queued),
                free(c->enqueuing);
        free(c);
        return err_set(e, ERR_NOMEM, "comm: no memory for a world of %d GPU replicas", n);
    }
    c->n = n;
    c->total = n;
    c->missing = -1;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return 0;
}

int comm_dev_make_id(unsigned char id[COMM_DEV_ID_BYTES], struct err *e)
{
    struct comm_nccl_fn fn;
    if (comm_nccl_load(&fn, e))
        return e->code;
    ncclUniqueId u;
    ncclResult_t nr = fn.get_unique_id(&u);
    if (nr != ncclSuccess)
        return err_set(e, ERR_DEVICE, "ncclGetUniqueId: %s", fn.get_error_string(nr));
    memcpy(id, &u, sizeof u);
    return 0;
}

int comm_dev_new_span(int n, int offset, int total, const unsigned char id[COMM_DEV_ID_BYTES],
                      struct comm_span *watch, struct comm_dev **out, struct err *e)
{
    *out = NULL;
    if (offset < 0 || n < 1 || total < offset + n)
        return err_set(e, ERR_INVALID_ARG, "comm: GPU ranks %d..%d of a world of %d", offset, offset + n - 1,
                       total);
    if (comm_dev_new(n, out, e))
        return e->code;
    (*out)->offset = offset;
    (*out)->total = total;
    memcpy(&(*out)->id, id, sizeof (*out)->id);
    (*out)->have_id = true;
    (*out)->watch = watch;
    return 0;
}

bool comm_dev_timed_out(struct comm_dev *c)
{
    pthread_mutex_lock(&c->mu);
    bool late = c->late;
    pthread_mutex_unlock(&c->mu);
    return late;
}

void comm_dev_free(struct comm_dev *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c->comm), free(c->ev), free(c->be), free(c->entered), free(c->ready), free(c->queued), free(c->enqueuing);
    free(c);
}

void comm_dev_set_timeout(struct comm_dev *c, double seconds)
{
    pthread_mutex_lock(&c->mu);
    c->timeout_s = seconds > 0 ? seconds : 0;
    pthread_mutex_unlock(&c->mu);
}

int comm_dev_missing(struct comm_dev *c)
{
    pthread_mutex_lock(&c->mu);
    int m = c->missing;
    pthread_mutex_unlock(&c->mu);
    return m;
}

/* With c->mu held: the world is aborted; the first reason stays. */
static void abort_locked(struct comm_dev *c, const char *why)
{
    if (!c->aborted) {
        c->aborted = true;
        snprintf(c->why, sizeof c->why, "%.*s", (int)sizeof c->why - 1, why);
    }
}

int comm_dev_abort(struct comm_dev *c, const char *why)
{
    pthread_mutex_lock(&c->mu);
    abort_locked(c, why ? why : "aborted");
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* With c->mu held, rank's wait past the timeout: the world is aborted, naming the ranks behind it. */
static void timed_out(struct comm_dev *c, int rank, char *why, size_t cap)
{
    int len = snprintf(why, cap, "no word from replica");
    int absent = 0;
    for (int r = 0; r < c->n; r++) {
        if (c->entered[r] >= c->entered[rank])
            continue;
        if (c->missing < 0)
            c->missing = r;
        if (len < (int)cap)
            len += snprintf(why + len, cap - (size_t)len, "%s %d", absent++ ? "," : "", c->offset + r);
    }
    if (!absent)   /* every rank here came: the collective, or a peer process, did not */
        len = snprintf(why, cap, "an all-reduce of %d GPUs did not finish", c->total);
    if (len < (int)cap)
        snprintf(why + len, cap - (size_t)len, " for %g s (--allreduce-timeout)", c->timeout_s);
    c->late = true;
    abort_locked(c, why);
}

/* Rank gives up on its communicator (it never waits on peers), so nothing of it is left queued. */
static void drop_comm(struct comm_dev *c, int rank)
{
    if (c->comm[rank])
        c->fn.comm_abort(c->comm[rank]);
    c->comm[rank] = NULL;
}

/* An NCCL failure of rank's: the world is aborted (peers must not wait) and the call fails. */
static int nccl_failed(struct comm_dev *c, int rank, const char *call, ncclResult_t rc, struct err *e)
{
    char why[sizeof c->why];
    snprintf(why, sizeof why, "replica %d: %s: %s", c->offset + rank, call, c->fn.get_error_string(rc));
    comm_dev_abort(c, why);
    drop_comm(c, rank);
    return err_set(e, ERR_DEVICE, "NCCL all-reduce: %s", why);
}

/* A device failure of rank's (e says which): as nccl_failed, e kept. */
static int device_failed(struct comm_dev *c, int rank, struct err *e)
{
    char why[sizeof c->why];
    snprintf(why, sizeof why, "replica %d: %.*s", c->offset + rank, (int)sizeof why - 20, e->msg);
    comm_dev_abort(c, why);
    drop_comm(c, rank);
    return e->code;
}

/*
 * Polls until rank's communicator has nothing in progress and, with ev, the device has passed
 * ev (recorded already, or here on the compute stream once NCCL has queued its work): 0; or
 * fails as the header says.
 */
static int poll_done(struct comm_dev *c, int rank, const struct backend *be, struct be_event *ev,
                     bool recorded, const char *call, struct err *e)
{
    pthread_mutex_lock(&c->mu);
    double deadline = c->timeout_s > 0 ? mono_now() + c->timeout_s : 0;
    pthread_mutex_unlock(&c->mu);
    long nap_ns = 20000;
    for (;;) {
        ncclResult_t st;
        ncclResult_t rc = c->fn.comm_get_async_error(c->comm[rank], &st);
        if (rc != ncclSuccess || (st != ncclSuccess && st != ncclInProgress))
            return nccl_failed(c, rank, call, rc != ncclSuccess ? rc : st, e);
        if (st == ncclSuccess && !ev)
            return 0;
        bool done = false;
        int brc = 0;
        if (st == ncclSuccess && !recorded && (brc = be->compute_record(be, ev, e)) == 0)
            recorded = true;
        if (!brc && recorded && st == ncclSuccess)
            brc = be->event_query(be, ev, &done, e);
        if (brc)
            return device_failed(c, rank, e);   /* the device failed under it */
        if (done)
            return 0;
        char why[sizeof c->why];
        /* Rank 0 here alone asks the span (one thread at a time): a peer process ended the world. */
        bool gone = rank == 0 && comm_span_ended(c->watch, why, sizeof why);
        pthread_mutex_lock(&c->mu);
        if (gone)
            abort_locked(c, why);
        bool late = !c->aborted && deadline > 0 && mono_now() > deadline;
        if (late)
            timed_out(c, rank, why, sizeof why);
        bool aborted = c->aborted;
        snprintf(why, sizeof why, "%s", c->why);
        pthread_mutex_unlock(&c->mu);
        if (aborted) {
            drop_comm(c, rank);
            return late ? err_set(e, ERR_DEVICE, "NCCL all-reduce: %s", why)
                        : err_set(e, ERR_CANCELLED, "all-reduce of %d replicas aborted: %s", c->total, why);
        }
        nanosleep(&(struct timespec){0, nap_ns}, NULL);   /* 20 us, doubling to 320 us */
        nap_ns = nap_ns < 320000 ? nap_ns * 2 : nap_ns;
    }
}

/* Rank's first collective: NCCL loaded, the world's id, its communicator and event made. */
static int join(struct comm_dev *c, int rank, const struct backend *be, struct err *e)
{
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (!c->loaded && (rc = comm_nccl_load(&c->fn, e)) == 0)
        c->loaded = true;
    ncclResult_t nr = ncclSuccess;
    if (!rc && !c->have_id && (nr = c->fn.get_unique_id(&c->id)) == ncclSuccess)
        c->have_id = true;
    ncclUniqueId id = c->id;
    if (rc || nr != ncclSuccess)
        abort_locked(c, rc ? e->msg : "ncclGetUniqueId failed");
    pthread_mutex_unlock(&c->mu);
    if (rc)
        return rc;
    if (nr != ncclSuccess)
        return nccl_failed(c, rank, "ncclGetUniqueId", nr, e);
    c->be[rank] = be;   /* for comm_dev_leave, which frees the events */
    if (be->event_new(be, &c->ev[rank], e) || be->event_new(be, &c->ready[rank], e)) {
        comm_dev_abort(c, e->msg);
        return e->code;
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    nr = c->fn.comm_init_rank_config(&c->comm[rank], c->total, id, c->offset + rank, &config);
    if (nr != ncclSuccess && nr != ncclInProgress)
        return nccl_failed(c, rank, "ncclCommInitRankConfig", nr, e);
    return poll_done(c, rank, be, NULL, false, "ncclCommInitRankConfig", e);
}

/* With c->mu held: why rank may not go on, or "" (the world is fine and the arguments are). */
static void refusal(struct comm_dev *c, int rank, const void *buf, size_t count, enum tensor_dtype dt,
                    char *why, size_t cap)
{
    if (c->aborted)
        snprintf(why, cap, "%s", c->why);
    else if (rank < 0 || rank >= c->n)
        snprintf(why, cap, "rank %d is not in 0..%d", rank, c->n - 1);
    else if (dt != TENSOR_F32 && dt != TENSOR_F64)
        snprintf(why, cap, "rank %d: dtype %d is neither float32 nor float64", rank, (int)dt);
    else if (!buf && count > 0)
        snprintf(why, cap, "rank %d: no buffer for %zu elements", rank, count);
    else
        why[0] = '\0';
}

/* Rank's collective begins: 0 (counted), or it may not (ERR_CANCELLED, ERR_INVALID_ARG as the header says). */
static int enter(struct comm_dev *c, int rank, const void *buf, size_t count, enum tensor_dtype dt, struct err *e)
{
    char why[sizeof c->why];
    pthread_mutex_lock(&c->mu);
    refusal(c, rank, buf, count, dt, why, sizeof why);
    bool was_aborted = c->aborted;
    if (why[0])
        abort_locked(c, why);
    else
        c->entered[rank]++;
    pthread_mutex_unlock(&c->mu);
    if (why[0]) {
        if (was_aborted)
            return err_set(e, ERR_CANCELLED, "all-reduce of %d replicas aborted: %s", c->total, why);
        return err_set(e, ERR_INVALID_ARG, "all-reduce: %s", why);
    }
    return 0;
}

int comm_dev_allreduce(struct comm_dev *c, int rank, const struct backend *be, void *buf,
                       size_t count, enum tensor_dtype dt, struct err *e)
{
    if (enter(c, rank, buf, count, dt, e))
        return e->code;
    void *stream;
    if (be->native_stream(be, &stream, e)) {
        comm_dev_abort(c, e->msg);
        return e->code;
    }
    if (!c->comm[rank] && join(c, rank, be, e))
        return e->code;
    ncclResult_t nr = c->fn.all_reduce(buf, buf, count, dt == TENSOR_F32 ? ncclFloat32 : ncclFloat64,
                                       ncclSum, c->comm[rank], (cudaStream_t)stream);
    if (nr != ncclSuccess && nr != ncclInProgress)
        return nccl_failed(c, rank, "ncclAllReduce", nr, e);
    return poll_done(c, rank, be, c->ev[rank], false, "ncclAllReduce", e);
}

/*
 * A bucket: the side stream waits for the compute stream's work so far (the bucket's last
 * gradient kernel), then runs the all-reduce. Nothing is polled here, so the host goes back to
 * backward at once; but NCCL forbids a call on a communicator whose last call is still in
 * progress (a non-blocking enqueue that returned ncclInProgress), so that one is waited for.
 */
int comm_dev_allreduce_start(struct comm_dev *c, int rank, const struct backend *be, void *buf,
                             size_t count, enum tensor_dtype dt, struct err *e)
{
    if (enter(c, rank, buf, count, dt, e))
        return e->code;
    if (!c->comm[rank] && join(c, rank, be, e))
        return e->code;
    if (c->enqueuing[rank] && poll_done(c, rank, be, NULL, false, "ncclAllReduce", e))
        return e->code;
    c->enqueuing[rank] = false;
    void *stream;
    if (be->compute_record(be, c->ready[rank], e) || be->side_wait(be, c->ready[rank], e) ||
        be->side_stream(be, &stream, e))
        return device_failed(c, rank, e);
    ncclResult_t nr = c->fn.all_reduce(buf, buf, count, dt == TENSOR_F32 ? ncclFloat32 : ncclFloat64,
                                       ncclSum, c->comm[rank], (cudaStream_t)stream);
    if (nr != ncclSuccess && nr != ncclInProgress)
        return nccl_failed(c, rank, "ncclAllReduce", nr, e);
    c->enqueuing[rank] = nr == ncclInProgress;
    c->queued[rank] = true;
    return 0;
}

/* The step's deadline and abort polling, once: after the side stream's last bucket. */
int comm_dev_allreduce_end(struct comm_dev *c, int rank, const struct backend *be, struct err *e)
{
    if (rank < 0 || rank >= c->n || !c->queued[rank])
        return 0;
    c->queued[rank] = c->enqueuing[rank] = false;
    if (!c->comm[rank]) {   /* a bucket failed, or the world was aborted under it */
        pthread_mutex_lock(&c->mu);
        char why[sizeof c->why];
        snprintf(why, sizeof why, "%s", c->aborted ? c->why : "a bucket failed");
        pthread_mutex_unlock(&c->mu);
        return err_set(e, ERR_CANCELLED, "all-reduce of %d replicas aborted: %s", c->total, why);
    }
    if (be->side_record(be, c->ev[rank], e) || be->compute_wait(be, c->ev[rank], e))
        return device_failed(c, rank, e);
    return poll_done(c, rank, be, c->ev[rank], true, "ncclAllReduce", e);
}

void comm_dev_leave(struct comm_dev *c, int rank)
{
    if (rank < 0 || rank >= c->n)
        return;
    if (c->comm[rank]) {
        pthread_mutex_lock(&c->mu);
        bool aborted = c->aborted;
        pthread_mutex_unlock(&c->mu);
        struct err e = {0};
        /* Finalizing waits for the peers' last collectives: under the deadline, else an abort. */
        ncclResult_t nr = aborted ? ncclInvalidUsage : c->fn.comm_finalize(c->comm[rank]);
        if ((nr == ncclSuccess || nr == ncclInProgress) &&
            poll_done(c, rank, c->be[rank], NULL, false, "ncclCommFinalize", &e) == 0) {
            c->fn.comm_destroy(c->comm[rank]);
            c->comm[rank] = NULL;
        }
        drop_comm(c, rank);   /* nothing left if destroyed */
    }
    if (c->ev[rank])
        c->be[rank]->event_free(c->be[rank], c->ev[rank]);
    if (c->ready[rank])
        c->be[rank]->event_free(c->be[rank], c->ready[rank]);
    c->ev[rank] = c->ready[rank] = NULL;
    c->queued[rank] = c->enqueuing[rank] = false;
}
