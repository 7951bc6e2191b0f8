/* comm_mpi.c — the world over Open MPI: control messages, and a job's cross-rank all-reduce with deadlines. */
#include "comm_mpi.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

/*
 * Two communicators, duplicates of MPI_COMM_WORLD: one for control messages (one tag), one
 * for the spans' data. Jobs run on different subsets of the ranks at once and start and end
 * on their own, so a span cannot take part in collectives on a shared communicator (their
 * order would have to agree across jobs): it gathers every process's partial with tagged
 * point-to-point messages (an all-gather) and each process sums the parts in span order.
 * Its tag 2*t carries data, 2*t+1 the news that a peer ended the span.
 */
#define CTRL_TAG 1
#define NOTICE_LEN 200    /* a peer's notice: its error code, whether it timed out, why */
#define POLL_NS 200000L   /* between two looks at a collective's requests in flight... */
#define SPIN_MS 2         /* ...after this long of looking again at once (yielding the core) */
#define IDLE_NS 2000000L  /* between two looks for a control message: an idle rank stays idle */

/* A buffer a freed span leaves to sends that may still read it, freed once MPI has ended. */
struct parked {
    struct parked *next;
    void *buf;
};

struct comm_mpi {
    int rank, size;
    int max_tag;            /* for comm_span_new: half of MPI_TAG_UB, less the control tag */
    MPI_Comm ctrl, data;
    pthread_mutex_t park_mu;
    struct parked *parked;
};

struct comm_span {
    struct comm_mpi *c;
    int *ranks, n, me;
    int data_tag, abort_tag;
    int64_t timeout_ms;
    MPI_Request abort_req;  /* a receive posted for any peer's notice */
    char notice_in[NOTICE_LEN];
    char *notice_out;       /* ours, once sent (its sends may outlive a wait for them) */
    atomic_flag told;       /* set by the one thread that sends it */
    MPI_Request *notice_reqs; /* n */
    atomic_bool ended;      /* abort here, a peer's notice, a deadline or a failure */
    atomic_bool timed_out;  /* the deadline, here or at a peer */
    int code;               /* what a call fails with once it ended */
    char why[NOTICE_LEN];   /* written once, by whoever ended it first */
    atomic_flag why_set;
    atomic_flag busy;       /* a call is in progress: a second at once is a caller's bug */
    void *scratch;          /* n parts of the last count; ours is what we send */
    size_t scratch_bytes;
    bool sends_left;        /* a failed call left sends behind that may still read scratch */
    MPI_Request *reqs;      /* 2 (n - 1) */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* A step's all-reduce is usually done within a millisecond: look again at once for SPIN_MS,
   then doze, so a long wait (a slow peer, a first batch) does not hold a core. */
static void nap_since(int64_t start_ms)
{
    if (now_ms() - start_ms < SPIN_MS)
        sched_yield();
    else
        nap(POLL_NS);
}

static int mpi_fail(struct err *e, const char *call, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error %d", rc);
    return err_set(e, ERR_INTERNAL, "%s: %s", call, msg);
}

#define MPI_CHECK(e, call)                                                             \
    do {                                                                               \
        int rc_ = (call);                                                              \
        if (rc_ != MPI_SUCCESS)                                                        \
            return mpi_fail((e), #call, rc_);                                          \
    } while (0)

int comm_mpi_init(int *argc, char ***argv, struct comm_mpi **out, struct err *e)
{
    *out = NULL;
    /* mpirun says so in the environment; a process started alone stays one. */
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK"))
        return 0;
    int provided = 0;
    MPI_CHECK(e, MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    if (provided < MPI_THREAD_MULTIPLE) {
        MPI_Finalize();
        return err_set(e, ERR_INTERNAL, "MPI: this Open MPI gives threads level %d, traind needs "
                       "MPI_THREAD_MULTIPLE (%d)", provided, MPI_THREAD_MULTIPLE);
    }
    struct comm_mpi *c = calloc(1, sizeof *c);
    if (!c) {
        MPI_Finalize();
        return err_set(e, ERR_NOMEM, "MPI: out of memory");
    }
    int *ub = NULL, flag = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    c->max_tag = (flag && ub ? *ub : 32767) / 2 - 1;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &c->ctrl) != MPI_SUCCESS ||
        MPI_Comm_dup(MPI_COMM_WORLD, &c->data) != MPI_SUCCESS) {
        free(c);
        MPI_Finalize();
        return err_set(e, ERR_INTERNAL, "MPI: MPI_Comm_dup failed");
    }
    /* Failures come back as codes; Open MPI still ends the world when a process dies. */
    MPI_Comm_set_errhandler(c->ctrl, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(c->data, MPI_ERRORS_RETURN);
    pthread_mutex_init(&c->park_mu, NULL);
    *out = c;
    return 0;
}

void comm_mpi_finalize(struct comm_mpi *c)
{
    if (!c)
        return;
    MPI_Comm_free(&c->ctrl);
    MPI_Comm_free(&c->data);
    MPI_Finalize();
    for (struct parked *p = c->parked, *next; p; p = next) {
        next = p->next;
        free(p->buf);
        free(p);
    }
    pthread_mutex_destroy(&c->park_mu);
    free(c);
}

/* buf may still be read by a send in flight: kept until comm_mpi_finalize (leaked without memory for that). */
static void park(struct comm_mpi *c, void *buf)
{
    struct parked *p = buf ? malloc(sizeof *p) : NULL;
    if (!p)
        return;
    p->buf = buf;
    pthread_mutex_lock(&c->park_mu);
    p->next = c->parked;
    c->parked = p;
    pthread_mutex_unlock(&c->park_mu);
}

int comm_mpi_rank(const struct comm_mpi *c)
{
    return c ? c->rank : 0;
}

int comm_mpi_size(const struct comm_mpi *c)
{
    return c ? c->size : 1;
}

int comm_mpi_max_tag(const struct comm_mpi *c)
{
    return c->max_tag;
}

/* Polls req until done or timeout_ms; past it, a receive is cancelled, a send left to finish. */
static int wait_for(MPI_Request *req, bool is_recv, int64_t timeout_ms, const char *what, struct err *e)
{
    int64_t until = now_ms() + timeout_ms;
    for (;;) {
        int done = 0;
        MPI_CHECK(e, MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (done)
            return 0;
        if (now_ms() >= until)
            break;
        nap(POLL_NS);
    }
    if (is_recv) {
        MPI_Cancel(req);
        MPI_Wait(req, MPI_STATUS_IGNORE);
    } else {
        MPI_Request_free(req);
    }
    return err_set(e, ERR_INTERNAL, "MPI: %s: no answer within %lld ms", what, (long long)timeout_ms);
}

int comm_mpi_send(struct comm_mpi *c, int to, const void *buf, size_t len, int64_t timeout_ms,
                  struct err *e)
{
    if (len > INT_MAX)
        return err_set(e, ERR_INVALID_ARG, "MPI: a control message of %zu bytes is too long", len);
    MPI_Request req;
    MPI_CHECK(e, MPI_Isend(buf, (int)len, MPI_BYTE, to, CTRL_TAG, c->ctrl, &req));
    char what[48];
    snprintf(what, sizeof what, "a message to rank %d", to);
    return wait_for(&req, false, timeout_ms, what, e);
}

int comm_mpi_recv(struct comm_mpi *c, int *from, char **buf, size_t *len, int64_t wait_ms,
                  struct err *e)
{
    *buf = NULL;
    *len = 0;
    int64_t until = now_ms() + wait_ms;
    MPI_Message msg;
    MPI_Status st;
    int flag = 0;
    for (;;) {
        MPI_CHECK(e, MPI_Improbe(MPI_ANY_SOURCE, CTRL_TAG, c->ctrl, &flag, &msg, &st));
        if (flag)
            break;
        if (now_ms() >= until)
            return 0;
        nap(IDLE_NS);
    }
    int n = 0;
    MPI_Get_count(&st, MPI_BYTE, &n);
    char *b = malloc((size_t)n + 1);
    if (!b) {
        MPI_Mrecv(NULL, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);   /* dropped, but not left matched */
        return err_set(e, ERR_NOMEM, "MPI: out of memory for a message of %d bytes", n);
    }
    MPI_Request req;
    int rc = MPI_Imrecv(b, n, MPI_BYTE, &msg, &req);
    if (rc != MPI_SUCCESS) {
        free(b);
        return mpi_fail(e, "MPI_Imrecv", rc);
    }
    char what[48];
    snprintf(what, sizeof what, "a message from rank %d", st.MPI_SOURCE);
    if (wait_for(&req, true, wait_ms > 60000 ? wait_ms : 60000, what, e)) {
        free(b);
        return e->code;
    }
    b[n] = '\0';
    *buf = b;
    *len = (size_t)n;
    *from = st.MPI_SOURCE;
    return 0;
}

int comm_span_new(struct comm_mpi *c, const int *ranks, int n, int me, int tag, int64_t timeout_ms,
                  struct comm_span **out, struct err *e)
{
    *out = NULL;
    if (n < 1 || me < 0 || me >= n || tag < 1 || tag > c->max_tag)
        return err_set(e, ERR_INVALID_ARG, "MPI: a span of %d processes, this one %d, tag %d", n, me, tag);
    struct comm_span *s = calloc(1, sizeof *s);
    if (!s || !(s->ranks = malloc((size_t)n * sizeof *s->ranks)) ||
        !(s->reqs = calloc(2 * (size_t)n, sizeof *s->reqs)) ||
        !(s->notice_reqs = calloc((size_t)n, sizeof *s->notice_reqs))) {
        if (s) {
            free(s->ranks);
            free(s->reqs);
        }
        free(s);
        return err_set(e, ERR_NOMEM, "MPI: out of memory for a span of %d processes", n);
    }
    memcpy(s->ranks, ranks, (size_t)n * sizeof *ranks);
    s->c = c;
    s->n = n;
    s->me = me;
    s->data_tag = 2 * tag;
    s->abort_tag = 2 * tag + 1;
    s->timeout_ms = timeout_ms;
    atomic_init(&s->ended, false);
    atomic_init(&s->timed_out, false);
    atomic_flag_clear(&s->why_set);
    atomic_flag_clear(&s->told);
    atomic_flag_clear(&s->busy);
    for (int p = 0; p < n; p++)
        s->notice_reqs[p] = MPI_REQUEST_NULL;
    int rc = MPI_Irecv(s->notice_in, NOTICE_LEN, MPI_CHAR, MPI_ANY_SOURCE, s->abort_tag, c->data, &s->abort_req);
    if (rc != MPI_SUCCESS) {
        free(s->ranks);
        free(s->reqs);
        free(s->notice_reqs);
        free(s);
        return mpi_fail(e, "MPI_Irecv", rc);
    }
    *out = s;
    return 0;
}

void comm_span_free(struct comm_span *s)
{
    if (!s)
        return;
    int done = 0;
    MPI_Test(&s->abort_req, &done, MPI_STATUS_IGNORE);
    if (!done) {
        MPI_Cancel(&s->abort_req);
        MPI_Wait(&s->abort_req, MPI_STATUS_IGNORE);
    }
    /* Our notices, if sent: a peer gone for good leaves its send (and the text) behind. */
    bool sent = true;
    for (int p = 0; p < s->n; p++) {
        struct err e = {0};
        if (s->notice_reqs[p] != MPI_REQUEST_NULL && wait_for(&s->notice_reqs[p], false, 1000, "a notice", &e))
            sent = false;
    }
    if (sent)
        free(s->notice_out);
    else
        park(s->c, s->notice_out);
    free(s->notice_reqs);
    if (s->sends_left)   /* a peer that wakes may still take our part */
        park(s->c, s->scratch);
    else
        free(s->scratch);
    free(s->reqs);
    free(s->ranks);
    free(s);
}

/* The first reason the span ended is kept, with the code later calls fail with. */
static void end_span(struct comm_span *s, int code, const char *why)
{
    if (!atomic_flag_test_and_set(&s->why_set)) {
        snprintf(s->why, sizeof s->why, "%s", why);
        s->code = code;
        atomic_store(&s->ended, true);
    }
}

/*
 * Tells every peer the span ended here: code (the failure's, which a peer's replica fails with
 * too), whether a deadline passed, and why. Sent once, by whichever thread comes first (a call
 * past its deadline, an abort from another thread); comm_span_free waits for the sends.
 */
static void tell_peers(struct comm_span *s, int code, const char *why)
{
    if (atomic_flag_test_and_set(&s->told) || !(s->notice_out = malloc(NOTICE_LEN)))
        return;
    s->notice_out[0] = (char)code;
    s->notice_out[1] = atomic_load(&s->timed_out);
    int len = snprintf(s->notice_out + 2, NOTICE_LEN - 2, "rank %d: %s", s->c->rank, why);
    int n = 2 + (len < NOTICE_LEN - 2 ? len : NOTICE_LEN - 3) + 1;
    for (int p = 0; p < s->n; p++)
        if (p != s->me)
            MPI_Isend(s->notice_out, n, MPI_CHAR, s->ranks[p], s->abort_tag, s->c->data, &s->notice_reqs[p]);
}

/* A peer's notice came: the span ends with its code and words. */
static void take_notice(struct comm_span *s)
{
    s->notice_in[NOTICE_LEN - 1] = '\0';
    if (s->notice_in[1])
        atomic_store(&s->timed_out, true);
    int code = s->notice_in[0];
    end_span(s, code > ERR_OK && code <= ERR_INTERNAL ? code : ERR_INTERNAL, s->notice_in + 2);
}

bool comm_span_ended(struct comm_span *s, char *why, size_t cap)
{
    int notice = 0;
    if (!s)
        return false;
    if (!atomic_load(&s->ended) && MPI_Test(&s->abort_req, &notice, MPI_STATUS_IGNORE) == MPI_SUCCESS && notice)
        take_notice(s);
    if (!atomic_load(&s->ended))
        return false;
    snprintf(why, cap, "%s", s->why);
    return true;
}

bool comm_span_timed_out(const struct comm_span *s)
{
    return atomic_load(&((struct comm_span *)s)->timed_out);
}

void comm_span_abort(struct comm_span *s, int code, const char *why)
{
    if (!s || atomic_load(&s->ended))
        return;
    why = why && *why ? why : "a replica left";
    end_span(s, ERR_CANCELLED, why);   /* a replica here waiting in a call is released */
    tell_peers(s, code, why);
}

/*
 * After a failure: receives in flight are cancelled, sends left to finish on their own. They
 * send from the span's scratch, never the caller's buffer (which the caller may free as soon as
 * the call fails), and the freed span parks the scratch until MPI has ended: a hung peer that
 * wakes could still take our part.
 */
static void drop_requests(struct comm_span *s, int nreq)
{
    for (int k = 0; k < nreq; k++) {
        if (s->reqs[k] == MPI_REQUEST_NULL)
            continue;
        if (k % 2 == 0) {
            MPI_Cancel(&s->reqs[k]);
            MPI_Wait(&s->reqs[k], MPI_STATUS_IGNORE);
        } else {
            MPI_Request_free(&s->reqs[k]);
            s->sends_left = true;
        }
    }
}

/* A call on an ended span fails with the code and words it ended with. */
static int span_error(const struct comm_span *s, struct err *e)
{
    return err_set(e, s->code, "all-reduce across ranks: %s", s->why);
}

/*
 * An MPI call failed: with errors returned rather than fatal, that is a peer's process gone
 * (its connection broken) before Open MPI ends the world. Counted as a hung peer, so the job
 * goes back to the queue, to resume from its checkpoint, rather than fail for a lost rank.
 */
static void peer_lost(struct comm_span *s)
{
    static const char why[] = "an MPI failure (a rank's process gone?)";
    atomic_store(&s->timed_out, true);
    end_span(s, ERR_INTERNAL, why);
    tell_peers(s, ERR_INTERNAL, why);
}

/* Waits for every request, a peer's notice, an abort here or the deadline. */
static int wait_all(struct comm_span *s, int nreq, struct err *e)
{
    int64_t start = now_ms(), until = start + s->timeout_ms;
    for (;;) {
        int all = 0, notice = 0;
        if (MPI_Testall(nreq, s->reqs, &all, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            peer_lost(s);
            break;
        }
        if (all)
            return 0;
        if (MPI_Test(&s->abort_req, &notice, MPI_STATUS_IGNORE) == MPI_SUCCESS && notice)
            take_notice(s);
        if (atomic_load(&s->ended))
            break;
        if (now_ms() >= until) {
            char why[96];
            snprintf(why, sizeof why, "no partial sum from every rank within %lld s",
                     (long long)(s->timeout_ms / 1000));
            atomic_store(&s->timed_out, true);
            end_span(s, ERR_INTERNAL, why);
            tell_peers(s, ERR_INTERNAL, why);
            break;
        }
        nap_since(start);
    }
    drop_requests(s, nreq);
    return span_error(s, e);
}

#define DEF_SUM_PARTS(NAME, T)                                                         \
    static void NAME(const void *parts, int n, size_t count, T *out)                   \
    {                                                                                  \
        const T *p = parts;                                                            \
        for (size_t i = 0; i < count; i++) {                                           \
            T acc = p[i];                                                              \
            for (int k = 1; k < n; k++)                                                \
                acc += p[(size_t)k * count + i];                                       \
            out[i] = acc;                                                              \
        }                                                                              \
    }
DEF_SUM_PARTS(sum_parts_f32, float)
DEF_SUM_PARTS(sum_parts_f64, double)

static int span_allreduce(struct comm_span *s, void *buf, size_t count, enum tensor_dtype dt,
                          struct err *e)
{
    if (atomic_load(&s->ended))
        return span_error(s, e);
    if (count > INT_MAX || (dt != TENSOR_F32 && dt != TENSOR_F64))
        return err_set(e, ERR_INVALID_ARG, "all-reduce across ranks: %zu elements of dtype %d", count, (int)dt);
    size_t size = tensor_dtype_size(dt), bytes = count * size;
    if (bytes * (size_t)s->n > s->scratch_bytes) {
        void *p = realloc(s->scratch, bytes * (size_t)s->n);
        if (!p) {
            comm_span_abort(s, ERR_NOMEM, "out of memory for an all-reduce");
            return err_set(e, ERR_NOMEM, "all-reduce across ranks: out of memory for %d parts", s->n);
        }
        s->scratch = p;
        s->scratch_bytes = bytes * (size_t)s->n;
    }
    MPI_Datatype type = dt == TENSOR_F32 ? MPI_FLOAT : MPI_DOUBLE;
    char *parts = s->scratch, *ours = parts + (size_t)s->me * bytes;
    memcpy(ours, buf, bytes);
    int nreq = 0;
    for (int p = 0; p < s->n; p++) {
        if (p == s->me)
            continue;
        /* even: the receive of p's part; odd: the send of ours to p */
        s->reqs[nreq] = s->reqs[nreq + 1] = MPI_REQUEST_NULL;
        if (MPI_Irecv(parts + (size_t)p * bytes, (int)count, type, s->ranks[p], s->data_tag, s->c->data,
                      &s->reqs[nreq]) != MPI_SUCCESS ||
            MPI_Isend(ours, (int)count, type, s->ranks[p], s->data_tag, s->c->data,
                      &s->reqs[nreq + 1]) != MPI_SUCCESS) {
            peer_lost(s);
            drop_requests(s, nreq + 2);
            return err_set(e, ERR_INTERNAL, "all-reduce across ranks: MPI_Isend/MPI_Irecv to rank %d failed",
                           s->ranks[p]);
        }
        nreq += 2;
    }
    if (wait_all(s, nreq, e))
        return e->code;
    if (dt == TENSOR_F32)
        sum_parts_f32(parts, s->n, count, buf);
    else
        sum_parts_f64(parts, s->n, count, buf);
    return 0;
}

/*
 * The span's messages carry no sequence number: a call's parts match the peers' calls in the
 * order each process makes them (MPI does not let a message from one source overtake another
 * on the same tag). So two calls at once here, from two threads, could take each other's
 * parts: that is a bug in the caller, and it ends the span rather than sum wrong parts.
 */
int comm_span_allreduce(struct comm_span *s, void *buf, size_t count, enum tensor_dtype dt,
                        struct err *e)
{
    if (atomic_flag_test_and_set(&s->busy)) {
        comm_span_abort(s, ERR_INTERNAL, "two all-reduces at once on one span");
        return err_set(e, ERR_INTERNAL, "all-reduce across ranks: called while another call was in progress");
    }
    int rc = span_allreduce(s, buf, count, dt, e);
    atomic_flag_clear(&s->busy);
    return rc;
}
