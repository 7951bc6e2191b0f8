/* allreduce_local.c — all-reduce among replica threads of one process: reduce-scatter, then all-gather by copies. */
#include "comm.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * One all-reduce is three barriers apart:
 *   1. every rank copies its buffer into its stage, memory of the world's;
 *   2. rank r reduces its chunk of the elements (the r-th of n near-equal contiguous
 *      ranges) over all ranks' stages in rank order and writes the result into its own
 *      stage's chunk — only rank r reads that chunk in this phase;
 *   3. rank r copies every chunk s from rank s's stage into its buffer, then waits until
 *      all have copied, so none overwrites its stage while a peer still reads it.
 * Which thread sums an element never changes its order of additions, hence the same bits
 * on every rank and in every run. No rank touches a peer's buffer, only the stages, which
 * live as long as the world: so a rank that gives up waiting (an abort, a timeout) returns
 * at once, even while a peer is frozen between two barriers and may read the stages later.
 */
enum phase { PH_JOINED, PH_REDUCED, PH_GATHERED };

struct comm_local {
    int n;
    pthread_mutex_t mu;
    /*
     * Moves at every barrier passed and at an abort; waiters sleep on it (a futex) without mu.
     * Not a condition variable: glibc's broadcast waits for the waiters it wakes to leave their
     * wait, so a rank stopped inside it (a debugger, ptrace) would stall the rank that wakes
     * it, with mu held, and so every peer. A futex wake waits for no one.
     */
    atomic_uint wake;
    int arrived;              /* ranks waiting at the current barrier */
    unsigned long gen;        /* barriers passed; a waiter leaves when it moves */
    int n_joined;             /* ranks joined to the collective in progress */
    /* the collective in progress; set while ranks join, read-only until it ends */
    void **stage;             /* by rank: the world's copy of its buffer, then its chunk of the result */
    size_t *stage_cap;        /* their sizes in bytes */
    bool *joined;
    size_t count;
    enum tensor_dtype dt;
    enum comm_op op;
    int first_rank;
    bool aborted;
    char why[200];
    double timeout_s;         /* the longest wait at a barrier; 0: no limit */
    unsigned long *at;        /* by rank: gen + 1 while it waits at barrier gen, else less */
    /*
     * The lowest rank a timed-out wait was for; -1: none. Written with mu held, read without:
     * the daemon's loop thread asks, and must never wait for mu, which a rank stopped while it
     * holds it (a debugger) would keep.
     */
    atomic_int missing;
};

static int pt_fail(struct err *e, int line, const char *call, int rc)
{
    return err_set(e, ERR_INTERNAL, "%s:%d: %s: %s", __FILE__, line, call, strerror(rc));
}

#define PT_CHECK(e, call)                                                              \
    do {                                                                               \
        int rc_ = (call);                                                              \
        if (rc_ != 0)                                                                  \
            return pt_fail((e), __LINE__, #call, rc_);                                 \
    } while (0)

int comm_local_new(int n, struct comm_local **out, struct err *e)
{
    *out = NULL;
    if (n < 1)
        return err_set(e, ERR_INVALID_ARG, "comm: a world needs at least 1 replica, not %d", n);
    struct comm_local *c = calloc(1, sizeof *c);
    void **stage = calloc((size_t)n, sizeof *stage);
    size_t *cap = calloc((size_t)n, sizeof *cap);
    bool *joined = calloc((size_t)n, sizeof *joined);
    unsigned long *at = calloc((size_t)n, sizeof *at);
    if (!c || !stage || !cap || !joined || !at) {
        free(c), free(stage), free(cap), free(joined), free(at);
        return err_set(e, ERR_NOMEM, "comm: no memory for a world of %d replicas", n);
    }
    c->n = n;
    c->stage = stage;
    c->stage_cap = cap;
    c->joined = joined;
    c->at = at;
    atomic_init(&c->missing, -1);
    atomic_init(&c->wake, 0);
    int rc = pthread_mutex_init(&c->mu, NULL);
    if (rc != 0) {
        free(c), free(stage), free(cap), free(joined), free(at);
        return pt_fail(e, __LINE__, "pthread_mutex_init", rc);
    }
    *out = c;
    return ERR_OK;
}

void comm_local_free(struct comm_local *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    for (int r = 0; r < c->n; r++)
        free(c->stage[r]);
    free(c->stage);
    free(c->stage_cap);
    free(c->joined);
    free(c->at);
    free(c);
}

int comm_local_size(const struct comm_local *c)
{
    return c->n;
}

void comm_local_set_timeout(struct comm_local *c, double seconds)
{
    pthread_mutex_lock(&c->mu);
    c->timeout_s = seconds > 0 ? seconds : 0;
    pthread_mutex_unlock(&c->mu);
}

int comm_local_missing(struct comm_local *c)
{
    return atomic_load(&c->missing);
}

/* With c->mu held: moves the wake word and wakes every waiter on it, waiting for none of them. */
static void wake_all(struct comm_local *c)
{
    atomic_fetch_add(&c->wake, 1);
    syscall(SYS_futex, (void *)&c->wake, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);   /* cannot fail on a valid word */
}

/*
 * With c->mu held: lets go of mu until the wake word moves from `seen` (read with mu held, so
 * no wake_all is missed) or the deadline passes (NULL: none); then takes mu again. The deadline
 * is on the monotonic clock, FUTEX_WAIT_BITSET's own: a change of the wall clock neither fires
 * nor delays it. Returns 0 (maybe early: the caller checks what it waits for), ETIMEDOUT,
 * or another errno.
 */
static int wait_wake(struct comm_local *c, unsigned seen, const struct timespec *deadline)
{
    pthread_mutex_unlock(&c->mu);
    long rc = syscall(SYS_futex, (void *)&c->wake, FUTEX_WAIT_BITSET_PRIVATE, seen, deadline, NULL,
                      FUTEX_BITSET_MATCH_ANY);
    int why = rc == 0 ? 0 : errno;
    pthread_mutex_lock(&c->mu);
    return why == EAGAIN || why == EINTR ? 0 : why;
}

/* With c->mu held: marks the world aborted (the first reason stays) and wakes every waiter. */
static void abort_locked(struct comm_local *c, const char *why)
{
    if (!c->aborted) {
        c->aborted = true;
        snprintf(c->why, sizeof c->why, "%s", why);
    }
    wake_all(c);
}

int comm_local_abort(struct comm_local *c, const char *why)
{
    struct err e = {0};
    PT_CHECK(&e, pthread_mutex_lock(&c->mu));
    abort_locked(c, why ? why : "aborted");
    PT_CHECK(&e, pthread_mutex_unlock(&c->mu));
    return ERR_OK;
}

/* With c->mu held, in an aborted world: fails the call (peers touch only the stages, which stay). */
static int leave_aborted(struct comm_local *c, struct err *e)
{
    return err_set(e, ERR_CANCELLED, "all-reduce of %d replicas aborted: %s", c->n, c->why);
}

/* Now on the monotonic clock plus seconds. */
static void deadline_after(double seconds, struct timespec *out)
{
    clock_gettime(CLOCK_MONOTONIC, out);
    double whole = (double)(time_t)seconds;
    out->tv_sec += (time_t)whole;
    out->tv_nsec += (long)((seconds - whole) * 1e9);
    if (out->tv_nsec >= 1000000000L) {
        out->tv_sec++;
        out->tv_nsec -= 1000000000L;
    }
}

/*
 * With c->mu held, a wait at barrier gen past the timeout: the world is aborted, naming the
 * ranks that never came (they are the ones stuck; the waiters are not).
 */
static void timed_out(struct comm_local *c, unsigned long gen)
{
    char why[sizeof c->why];
    int len = snprintf(why, sizeof why, "no word from replica");
    int absent = 0;
    for (int r = 0; r < c->n; r++) {
        if (c->at[r] == gen + 1)
            continue;
        if (atomic_load(&c->missing) < 0)
            atomic_store(&c->missing, r);
        if (len < (int)sizeof why)
            len += snprintf(why + len, sizeof why - (size_t)len, "%s %d", absent++ ? "," : "", r);
    }
    if (len < (int)sizeof why)
        snprintf(why + len, sizeof why - (size_t)len, " for %g s at an all-reduce (--allreduce-timeout)",
                 c->timeout_s);
    abort_locked(c, why);
}

/* With c->mu held: waits for all n ranks at barrier `ph`, or fails if the world is aborted. */
static int barrier(struct comm_local *c, enum phase ph, int rank, struct err *e)
{
    if (c->aborted)
        return leave_aborted(c, e);
    unsigned long gen = c->gen;
    if (++c->arrived == c->n) {
        c->arrived = 0;
        c->gen++;
        if (ph == PH_JOINED)
            c->n_joined = 0;
        wake_all(c);
        return ERR_OK;
    }
    c->at[rank] = gen + 1;
    struct timespec deadline;
    deadline_after(c->timeout_s, &deadline);
    while (c->gen == gen && !c->aborted) {
        int rc = wait_wake(c, atomic_load(&c->wake), c->timeout_s > 0 ? &deadline : NULL);
        if (rc == ETIMEDOUT && c->gen == gen && !c->aborted)
            timed_out(c, gen);
        else if (rc != 0 && rc != ETIMEDOUT) {
            abort_locked(c, "a replica could not wait at the barrier");  /* peers too */
            return pt_fail(e, __LINE__, "futex wait", rc);
        }
    }
    if (c->gen == gen)
        return leave_aborted(c, e);
    return ERR_OK;
}

/* With c->mu held: checks a rank's arguments against the first rank's and makes its stage big enough. */
static int join(struct comm_local *c, int rank, const void *buf, size_t count, enum tensor_dtype dt,
                enum comm_op op, struct err *e)
{
    char why[sizeof c->why];
    if (rank < 0 || rank >= c->n)
        snprintf(why, sizeof why, "rank %d is not in 0..%d", rank, c->n - 1);
    else if (dt != TENSOR_F32 && dt != TENSOR_F64)
        snprintf(why, sizeof why, "rank %d: dtype %d is neither float32 nor float64", rank, (int)dt);
    else if (op != COMM_SUM && op != COMM_MEAN)
        snprintf(why, sizeof why, "rank %d: op %d is neither sum nor mean", rank, (int)op);
    else if (!buf && count > 0)
        snprintf(why, sizeof why, "rank %d: no buffer for %zu elements", rank, count);
    else if (c->joined[rank])
        snprintf(why, sizeof why, "rank %d joined twice", rank);
    else if (c->n_joined > 0 && (count != c->count || dt != c->dt || op != c->op))
        snprintf(why, sizeof why, "rank %d passed %zu %s elements to %s, rank %d %zu %s to %s",
                 rank, count, tensor_dtype_name(dt), op == COMM_SUM ? "sum" : "mean",
                 c->first_rank, c->count, tensor_dtype_name(c->dt),
                 c->op == COMM_SUM ? "sum" : "mean");
    else
        why[0] = '\0';
    if (why[0]) {
        /* the peers would wait forever for this rank: fail them too */
        abort_locked(c, why);
        return err_set(e, ERR_INVALID_ARG, "all-reduce: %s", why);
    }
    size_t bytes = count * tensor_dtype_size(dt);
    if (bytes > c->stage_cap[rank]) {   /* no peer reads it: the last collective has ended */
        void *grown = realloc(c->stage[rank], bytes);
        if (!grown) {
            abort_locked(c, "a replica ran out of memory for its all-reduce");
            return err_set(e, ERR_NOMEM, "all-reduce: no memory for %zu bytes", bytes);
        }
        c->stage[rank] = grown;
        c->stage_cap[rank] = bytes;
    }
    if (c->n_joined++ == 0) {
        c->count = count;
        c->dt = dt;
        c->op = op;
        c->first_rank = rank;
    }
    c->joined[rank] = true;
    return ERR_OK;
}

/* Rank r's chunk: [lo, hi), the r-th of n contiguous ranges differing in size by one at most. */
static void chunk_of(size_t count, int n, int r, size_t *lo, size_t *hi)
{
    size_t base = count / (size_t)n, extra = count % (size_t)n, ur = (size_t)r;
    *lo = ur * base + (ur < extra ? ur : extra);
    *hi = *lo + base + (ur < extra ? 1 : 0);
}

/*
 * out[i] = ((b0[i] + b1[i]) + b2[i]) + ... over [lo, hi), divided by n for the mean, in
 * tiles so that the sums vectorise and out (one of the b's) is written only once read.
 */
#define REDUCE_TILE 512
#define DEF_REDUCE(NAME, T)                                                            \
    static void NAME(void *const *bufs, int n, size_t lo, size_t hi, enum comm_op op, \
                     T *out)                                                           \
    {                                                                                  \
        T acc[REDUCE_TILE];                                                            \
        for (size_t t = lo; t < hi; t += REDUCE_TILE) {                                \
            size_t m = hi - t < REDUCE_TILE ? hi - t : REDUCE_TILE;                    \
            const T *b0 = (const T *)bufs[0] + t;                                      \
            for (size_t i = 0; i < m; i++)                                             \
                acc[i] = b0[i];                                                        \
            for (int k = 1; k < n; k++) {                                              \
                const T *bk = (const T *)bufs[k] + t;                                  \
                for (size_t i = 0; i < m; i++)                                         \
                    acc[i] += bk[i];                                                   \
            }                                                                          \
            if (op == COMM_MEAN)                                                       \
                for (size_t i = 0; i < m; i++)                                         \
                    acc[i] /= (T)n;                                                    \
            memcpy(out + t, acc, m * sizeof(T));                                       \
        }                                                                              \
    }
DEF_REDUCE(reduce_f32, float)
DEF_REDUCE(reduce_f64, double)

/* Phase 2, without the lock: the collective's fields stay fixed until its last barrier. */
static void reduce_chunk(const struct comm_local *c, int rank)
{
    size_t lo, hi;
    chunk_of(c->count, c->n, rank, &lo, &hi);
    if (c->dt == TENSOR_F32)
        reduce_f32(c->stage, c->n, lo, hi, c->op, c->stage[rank]);
    else
        reduce_f64(c->stage, c->n, lo, hi, c->op, c->stage[rank]);
}

/* Phase 3, without the lock: every rank's reduced chunk, from its stage into buf. */
static void gather_chunks(const struct comm_local *c, void *buf)
{
    size_t size = tensor_dtype_size(c->dt);
    for (int s = 0; s < c->n; s++) {
        size_t lo, hi;
        chunk_of(c->count, c->n, s, &lo, &hi);
        if (hi > lo)
            memcpy((char *)buf + lo * size, (const char *)c->stage[s] + lo * size, (hi - lo) * size);
    }
}

/* Locks, joins the collective (checks the arguments, sizes the stage), unlocks. */
static int enter(struct comm_local *c, int rank, const void *buf, size_t count, enum tensor_dtype dt,
                 enum comm_op op, struct err *e)
{
    PT_CHECK(e, pthread_mutex_lock(&c->mu));
    int rc = c->aborted ? leave_aborted(c, e) : join(c, rank, buf, count, dt, op, e);
    PT_CHECK(e, pthread_mutex_unlock(&c->mu));
    return rc;
}

/* Locks, passes barrier `ph`, unlocks. */
static int step(struct comm_local *c, enum phase ph, int rank, struct err *e)
{
    PT_CHECK(e, pthread_mutex_lock(&c->mu));
    int rc = barrier(c, ph, rank, e);
    if (rc == ERR_OK && ph == PH_JOINED)
        c->joined[rank] = false;   /* every rank has joined: ready for the next collective */
    PT_CHECK(e, pthread_mutex_unlock(&c->mu));
    return rc;
}

int comm_local_allreduce(struct comm_local *c, int rank, void *buf, size_t count,
                         enum tensor_dtype dt, enum comm_op op, struct err *e)
{
    int rc = enter(c, rank, buf, count, dt, op, e);
    if (rc != ERR_OK)
        return rc;
    if (count)   /* this rank's stage: no peer reads it before the barrier */
        memcpy(c->stage[rank], buf, count * tensor_dtype_size(dt));
    if ((rc = step(c, PH_JOINED, rank, e)) != ERR_OK)
        return rc;
    reduce_chunk(c, rank);
    if ((rc = step(c, PH_REDUCED, rank, e)) != ERR_OK)
        return rc;
    gather_chunks(c, buf);
    return step(c, PH_GATHERED, rank, e);
}
