/* prefetch.c — the producer thread, the slot ring (free stack, ready FIFO) and the consumer's blocking take. */
#include "prefetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hugemem.h"
#include "thread.h"

/* Waits wake at least this often to look at the stop flag, even if a wake-up were lost. */
#define POLL_SECONDS 0.2

enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD };

struct slot {
    void *mem;
    void *out;                          /* what the consumer gets: mem, or a view of the dataset */
    enum slot_state state;
    size_t rows;
    struct dataset_cursor at, next;
};

struct prefetch {
    struct dataset *ds;
    struct prefetch_allocator alloc;
    bool views;
    size_t row_bytes;
    size_t n;
    struct slot *slot;
    size_t *free_stack, free_n;         /* slots the producer may fill */
    size_t *ready, ready_head, ready_n; /* FIFO of filled slots, in dataset order */
    size_t held;

    pthread_mutex_t mu;
    pthread_cond_t ready_cv, free_cv;   /* CLOCK_MONOTONIC */
    pthread_t thread;
    bool stop, failed;
    struct err err;                     /* the producer's error, when failed */

    uint64_t bytes, rows, batches;
    double wait_s, producer_wait_s;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Waits on cv until `until` (monotonic seconds) at the latest; spurious wake-ups are the caller's loop's business. */
static void wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double until)
{
    struct timespec ts;
    double whole = (double)(time_t)until;
    ts.tv_sec = (time_t)until;
    ts.tv_nsec = (long)((until - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int rc = pthread_cond_timedwait(cv, mu, &ts);
    (void)rc; /* ETIMEDOUT and wake-ups alike: the caller re-checks its condition and the clock */
}

static void *default_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return hugemem_alloc(bytes);
}

static void default_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static void *producer(void *arg)
{
    struct prefetch *pf = arg;
    pthread_mutex_lock(&pf->mu);
    for (;;) {
        while (!pf->stop && pf->free_n == 0) {
            double t0 = now_s();
            wait_until(&pf->free_cv, &pf->mu, t0 + POLL_SECONDS);
            pf->producer_wait_s += now_s() - t0;
        }
        if (pf->stop)
            break;
        size_t s = pf->free_stack[--pf->free_n];
        pf->slot[s].state = SLOT_FILLING;
        pthread_mutex_unlock(&pf->mu);

        /* The dataset is ours alone while we run: no lock held while parsing or copying. */
        struct err e = {0};
        size_t rows = 0;
        struct dataset_cursor at, next;
        const void *view = NULL;
        int rc = pf->views ? dataset_next_view(pf->ds, &view, &rows, &at, &e) : ERR_OK;
        if (rc == ERR_OK && !view)
            rc = dataset_next_batch(pf->ds, pf->slot[s].mem, &rows, &at, &e);
        if (rc == ERR_OK)
            dataset_tell(pf->ds, &next);

        pthread_mutex_lock(&pf->mu);
        if (rc != ERR_OK) {
            pf->err = e;
            pf->err.code = rc;
            pf->failed = true;
            pf->slot[s].state = SLOT_FREE;
            pf->free_stack[pf->free_n++] = s;
            pthread_cond_broadcast(&pf->ready_cv);
            break;
        }
        pf->slot[s].state = SLOT_READY;
        pf->slot[s].out = view ? (void *)view : pf->slot[s].mem;
        pf->slot[s].rows = rows;
        pf->slot[s].at = at;
        pf->slot[s].next = next;
        pf->ready[(pf->ready_head + pf->ready_n) % pf->n] = s;
        pf->ready_n++;
        pthread_cond_signal(&pf->ready_cv);
    }
    pthread_mutex_unlock(&pf->mu);
    return NULL;
}

static void destroy(struct prefetch *pf)
{
    for (size_t i = 0; pf->slot && i < pf->n; i++)
        if (pf->slot[i].mem)
            pf->alloc.free(pf->alloc.ctx, pf->slot[i].mem);
    free(pf->slot);
    free(pf->free_stack);
    free(pf->ready);
    free(pf);
}

static int init_sync(struct prefetch *pf, struct err *e)
{
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (rc == 0)
        rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0 && (rc = pthread_cond_init(&pf->ready_cv, &ca)) == 0 &&
        (rc = pthread_cond_init(&pf->free_cv, &ca)) != 0)
        pthread_cond_destroy(&pf->ready_cv);
    pthread_condattr_destroy(&ca);
    if (rc == 0 && (rc = pthread_mutex_init(&pf->mu, NULL)) != 0) {
        pthread_cond_destroy(&pf->ready_cv);
        pthread_cond_destroy(&pf->free_cv);
    }
    if (rc)
        return err_set(e, ERR_INTERNAL, "%s:%d: prefetch: pthread init failed: %s", __FILE__, __LINE__,
                       strerror(rc));
    return ERR_OK;
}

static void fini_sync(struct prefetch *pf)
{
    pthread_mutex_destroy(&pf->mu);
    pthread_cond_destroy(&pf->ready_cv);
    pthread_cond_destroy(&pf->free_cv);
}

/* Creates the thread with SIGTERM and SIGINT blocked, so it never sees them. */
static int start_thread(struct prefetch *pf, struct err *e)
{
    int rc = thread_start(&pf->thread, producer, pf);
    if (rc)
        return err_set(e, rc == EAGAIN ? ERR_NOMEM : ERR_INTERNAL, "%s:%d: prefetch: pthread_create: %s",
                       __FILE__, __LINE__, strerror(rc));
    return ERR_OK;
}

int prefetch_start(struct dataset *ds, const struct prefetch_config *cfg, struct prefetch **out, struct err *e)
{
    *out = NULL;
    size_t n = cfg && cfg->slots ? cfg->slots : 2;
    const struct prefetch_allocator *a = cfg ? cfg->allocator : NULL;
    if (a && (!a->alloc || !a->free))
        return err_set(e, ERR_INVALID_ARG, "prefetch: an allocator needs both alloc and free");
    if (n > 4096)
        return err_set(e, ERR_INVALID_ARG, "prefetch: %zu slots is too many", n);
    struct prefetch *pf = calloc(1, sizeof *pf);
    if (!pf)
        return err_set(e, ERR_NOMEM, "prefetch: out of memory");
    pf->ds = ds;
    pf->alloc = a ? *a : (struct prefetch_allocator){default_alloc, default_free, NULL};
    pf->views = cfg && cfg->views;
    pf->row_bytes = dataset_row_bytes(ds);
    pf->n = n;
    pf->slot = calloc(n, sizeof *pf->slot);
    pf->free_stack = calloc(n, sizeof *pf->free_stack);
    pf->ready = calloc(n, sizeof *pf->ready);
    if (!pf->slot || !pf->free_stack || !pf->ready) {
        destroy(pf);
        return err_set(e, ERR_NOMEM, "prefetch: out of memory");
    }
    size_t bytes = dataset_batch_bytes(ds);
    for (size_t i = 0; i < n; i++) {
        if (!(pf->slot[i].mem = pf->alloc.alloc(pf->alloc.ctx, bytes))) {
            destroy(pf);
            return err_set(e, ERR_NOMEM, "prefetch: cannot allocate slot %zu of %zu (%zu bytes)", i + 1, n, bytes);
        }
        /* filled from the top so slot 0 goes first: easier to read in a debugger */
        pf->free_stack[pf->free_n++] = n - 1 - i;
    }
    int rc = init_sync(pf, e);
    if (rc) {
        destroy(pf);
        return rc;
    }
    if ((rc = start_thread(pf, e)) != ERR_OK) {
        fini_sync(pf);
        destroy(pf);
        return rc;
    }
    *out = pf;
    return ERR_OK;
}

int prefetch_next(struct prefetch *pf, double timeout_s, struct prefetch_slot *slot, struct err *e)
{
    memset(slot, 0, sizeof *slot);
    pthread_mutex_lock(&pf->mu);
    double t0 = now_s(), deadline = timeout_s < 0 ? -1 : t0 + timeout_s;
    bool waited = pf->ready_n == 0;
    while (pf->ready_n == 0 && !pf->failed && !pf->stop) {
        double t = now_s();
        if (deadline >= 0 && t >= deadline)
            break;
        double until = t + POLL_SECONDS;
        wait_until(&pf->ready_cv, &pf->mu, deadline >= 0 && deadline < until ? deadline : until);
    }
    if (waited)
        pf->wait_s += now_s() - t0;
    int rc = ERR_OK;
    if (pf->ready_n > 0) {
        size_t s = pf->ready[pf->ready_head];
        pf->ready_head = (pf->ready_head + 1) % pf->n;
        pf->ready_n--;
        pf->slot[s].state = SLOT_HELD;
        pf->held++;
        slot->data = pf->slot[s].out;
        slot->rows = pf->slot[s].rows;
        slot->cursor = pf->slot[s].at;
        slot->next = pf->slot[s].next;
        slot->index = s;
        pf->batches++;
        pf->rows += slot->rows;
        pf->bytes += (uint64_t)slot->rows * pf->row_bytes;
    } else if (pf->failed) {
        rc = pf->err.code;
        if (e)
            *e = pf->err;
    } else if (pf->stop) {
        rc = err_set(e, ERR_CANCELLED, "prefetch: stopped");
    }
    pthread_mutex_unlock(&pf->mu);
    return rc;
}

void prefetch_release(struct prefetch *pf, const struct prefetch_slot *slot)
{
    pthread_mutex_lock(&pf->mu);
    size_t s = slot->index;
    /* a slot released twice, or never handed out, is ignored rather than handed to the producer twice */
    if (slot->data && s < pf->n && pf->slot[s].state == SLOT_HELD && pf->slot[s].out == slot->data) {
        pf->slot[s].state = SLOT_FREE;
        pf->free_stack[pf->free_n++] = s;
        pf->held--;
        pthread_cond_signal(&pf->free_cv);
    }
    pthread_mutex_unlock(&pf->mu);
}

void prefetch_stats(struct prefetch *pf, struct prefetch_stats *st)
{
    pthread_mutex_lock(&pf->mu);
    st->bytes = pf->bytes;
    st->rows = pf->rows;
    st->batches = pf->batches;
    st->slots = pf->n;
    st->ready = pf->ready_n;
    st->held = pf->held;
    st->wait_seconds = pf->wait_s;
    st->producer_wait_seconds = pf->producer_wait_s;
    pthread_mutex_unlock(&pf->mu);
}

void prefetch_stop(struct prefetch *pf)
{
    if (!pf)
        return;
    pthread_mutex_lock(&pf->mu);
    pf->stop = true;
    pthread_cond_broadcast(&pf->free_cv);
    pthread_cond_broadcast(&pf->ready_cv);
    pthread_mutex_unlock(&pf->mu);
    pthread_join(pf->thread, NULL);
    fini_sync(pf);
    destroy(pf);
}
