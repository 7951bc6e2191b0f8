/* worker.c — worker threads: wait for a task (timed waits, a stop flag), run it, repeat. */
#include "worker.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define WORKER_NICE 10

struct worker {
    char device[16];
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;                 /* on CLOCK_MONOTONIC */
    struct runner_task *next;          /* assigned, not yet taken (guarded by mu) */
    bool stop;                         /* guarded by mu */
    atomic_llong heartbeat;            /* runner_now_ms() of the last sign of life */
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    /*
     * Training yields the CPU to the loop thread: the API stays quick while every core
     * trains. On Linux a thread id selects just this thread (not POSIX, but what glibc does).
     */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WORKER_NICE) != 0)
        log_debug("worker %s: setpriority: %s", w->device, strerror(errno));
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->next && !w->stop) {
            atomic_store(&w->heartbeat, runner_now_ms());
            /* Timed, so a lost wake-up costs a second rather than a hang. */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += 1;
            int rc = pthread_cond_timedwait(&w->cv, &w->mu, &ts);
            if (rc && rc != ETIMEDOUT)
                log_error("worker %s: pthread_cond_timedwait: %s", w->device, strerror(rc));
        }
        struct runner_task *t = w->next;
        w->next = NULL;
        bool stop = w->stop && !t;
        pthread_mutex_unlock(&w->mu);
        if (stop)
            return NULL;
        t->heartbeat = &w->heartbeat;
        runner_run(t);
        atomic_store(&w->heartbeat, runner_now_ms());
    }
}

int worker_start(const char *device, struct worker **out, struct err *e)
{
    struct worker *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(e, ERR_NOMEM, "worker: out of memory");
    snprintf(w->device, sizeof w->device, "%s", device);
    atomic_init(&w->heartbeat, runner_now_ms());
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (!rc)
        rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (!rc)
        rc = pthread_cond_init(&w->cv, &ca);
    if (!rc)
        pthread_condattr_destroy(&ca);
    if (rc || (rc = pthread_mutex_init(&w->mu, NULL))) {
        free(w);
        return err_set(e, ERR_INTERNAL, "worker %s: %s:%d: %s", device, __FILE__, __LINE__, strerror(rc));
    }
    /* Block the signals before creating the thread so it is born with them blocked. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    rc = pthread_create(&w->thread, NULL, worker_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return err_set(e, ERR_INTERNAL, "worker %s: pthread_create: %s", device, strerror(rc));
    }
    w->started = true;
    *out = w;
    return 0;
}

void worker_assign(struct worker *w, struct runner_task *t)
{
    pthread_mutex_lock(&w->mu);
    w->next = t;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

const char *worker_device(const struct worker *w)
{
    return w->device;
}

int64_t worker_heartbeat_age_ms(const struct worker *w)
{
    return runner_now_ms() - atomic_load(&((struct worker *)w)->heartbeat);
}

void worker_stop(struct worker *w)
{
    if (!w || !w->started)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    int rc = pthread_join(w->thread, NULL);
    if (rc)
        log_error("worker %s: pthread_join: %s", w->device, strerror(rc));
    w->started = false;
}

void worker_free(struct worker *w)
{
    if (!w)
        return;
    worker_stop(w);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
