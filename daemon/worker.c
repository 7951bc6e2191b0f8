/* worker.c — worker threads: wait for a task (timed waits, a stop flag), run it, repeat; a GPU worker keeps its backend. */
#include "worker.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "affinity.h"
#include "log.h"
#include "thread.h"
#include "wdev.h"

#define WORKER_NICE 10

struct worker {
    char device[32];
    int cuda_index;                    /* -1: a CPU worker */
    const struct backend_factory *gpus; /* makes a GPU worker's backend; NULL: none can be */
    char pci_bus_id[32];
    struct wdev *dev;                  /* the GPU worker's backend (its thread's only) */
    struct err dev_err;                /* why dev could not be made, or was lost (written before dev_failed) */
    atomic_bool dev_failed;
    bool ready;                        /* the thread has made (or failed to make) dev; guarded by mu */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;                 /* on CLOCK_MONOTONIC */
    struct task *next;          /* assigned, not yet taken (guarded by mu) */
    bool stop;                         /* guarded by mu */
    atomic_llong heartbeat;            /* train_now_ms() of the last sign of life */
    struct worker_remote remote;       /* a worker of another rank: no thread here (remote.assign set) */
    int rank, index;                   /* its rank (0: this process) and its index there */
};

/*
 * Pins the calling (worker) thread to the CPUs sysfs says are local to the GPU, so its
 * host work and the pinned ring stay on the GPU's NUMA node. Best effort: without the
 * file (no sysfs, a virtual GPU) the thread stays unpinned.
 */
static void pin_near(const struct worker *w)
{
    char path[128], list[4096];
    if (!affinity_cpulist_path(w->pci_bus_id, path, sizeof path)) {
        log_debug("worker %s: no usable PCI bus id ('%s'); not pinned", w->device, w->pci_bus_id);
        return;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        log_debug("worker %s: %s: %s; not pinned", w->device, path, strerror(errno));
        return;
    }
    bool ok = fgets(list, sizeof list, f) != NULL;
    fclose(f);
    cpu_set_t set;
    if (!ok || !affinity_parse_cpulist(list, &set)) {
        log_debug("worker %s: %s is unreadable; not pinned", w->device, path);
        return;
    }
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (rc)
        log_debug("worker %s: pthread_setaffinity_np: %s; not pinned", w->device, strerror(rc));
    else
        log_info("worker %s: pinned to CPUs %.*s", w->device, (int)strcspn(list, "\n"), list);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    /*
     * Training yields the CPU to the loop thread: the API stays quick while every core
     * trains. On Linux a thread id selects just this thread (not POSIX, but what glibc does).
     */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WORKER_NICE) != 0)
        log_debug("worker %s: setpriority: %s", w->device, strerror(errno));
    /* "traind/cpu:1" in top -H, gdb and /proc/PID/task/TID/comm: which thread trains where. */
    char name[16];   /* the kernel keeps 15 characters */
    memcpy(name, "traind/", 7);
    snprintf(name + 7, sizeof name - 7, "%.8s", w->device);
    pthread_setname_np(pthread_self(), name);
    if (w->cuda_index >= 0) {
        pin_near(w);
        /* The factory makes the device current in this thread: the one that uses it. */
        if (wdev_open(w->gpus, w->cuda_index, &w->dev, &w->dev_err)) {
            log_error("worker %s: %s; jobs asking for it fail", w->device, w->dev_err.msg);
            atomic_store(&w->dev_failed, true);
        } else {
            log_info("worker %s: CUDA backend ready", w->device);
        }
    }
    pthread_mutex_lock(&w->mu);
    w->ready = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->next && !w->stop) {
            atomic_store(&w->heartbeat, train_now_ms());
            /* Timed, so a lost wake-up costs a second rather than a hang. */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += 1;
            int rc = pthread_cond_timedwait(&w->cv, &w->mu, &ts);
            if (rc && rc != ETIMEDOUT)
                log_error("worker %s: pthread_cond_timedwait: %s", w->device, strerror(rc));
        }
        struct task *t = w->next;
        w->next = NULL;
        bool stop = w->stop && !t;
        pthread_mutex_unlock(&w->mu);
        if (stop)
            break;
        task_run(t, w->dev, atomic_load(&w->dev_failed) ? &w->dev_err : NULL, &w->heartbeat);
        struct err lost = {0};
        if (w->dev && !atomic_load(&w->dev_failed) && wdev_job_end(w->dev, &lost)) {
            w->dev_err = lost;
            atomic_store(&w->dev_failed, true); /* the scheduler gives it no more jobs but those naming it */
            log_error("worker %s: %s", w->device, lost.msg);
        }
        atomic_store(&w->heartbeat, train_now_ms());
    }
    wdev_close(w->dev);
    w->dev = NULL;
    return NULL;
}

/*
 * A GPU worker is given no job before its backend exists, so the scheduler knows whether
 * it has one. A driver that takes longer than WORKER_READY_S is logged and not waited for:
 * jobs then queue behind the creation on the worker's thread.
 */
#define WORKER_READY_S 120

void worker_wait_ready(struct worker *w, const struct timespec *since)
{
    if (w->cuda_index < 0)
        return;   /* a CPU worker has nothing to make */
    struct timespec until = *since;
    until.tv_sec += WORKER_READY_S;
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (!w->ready && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
    bool ready = w->ready;
    pthread_mutex_unlock(&w->mu);
    if (!ready)
        log_warn("worker %s: its CUDA backend is not ready after %d s; starting anyway", w->device,
                 WORKER_READY_S);
}

int worker_start(const char *device, int cuda_index, const char *pci_bus_id,
                 const struct backend_factory *gpus, struct worker **out, struct err *e)
{
    struct worker *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(e, ERR_NOMEM, "worker: out of memory");
    snprintf(w->device, sizeof w->device, "%s", device);
    w->cuda_index = cuda_index;
    w->gpus = gpus;
    snprintf(w->pci_bus_id, sizeof w->pci_bus_id, "%s", pci_bus_id ? pci_bus_id : "");
    atomic_init(&w->heartbeat, train_now_ms());
    atomic_init(&w->dev_failed, false);
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
    rc = thread_start(&w->thread, worker_main, w);
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

int worker_start_remote(const char *device, int rank, int index, const struct worker_remote *via,
                        struct worker **out, struct err *e)
{
    struct worker *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(e, ERR_NOMEM, "worker: out of memory");
    snprintf(w->device, sizeof w->device, "%s", device);
    w->cuda_index = -1;
    w->remote = *via;
    w->rank = rank;
    w->index = index;
    atomic_init(&w->heartbeat, train_now_ms());
    atomic_init(&w->dev_failed, false);
    *out = w;
    return 0;
}

int worker_rank(const struct worker *w)
{
    return w->rank;
}

int worker_index(const struct worker *w)
{
    return w->index;
}

void worker_assign(struct worker *w, struct task *t)
{
    if (w->remote.assign) {
        w->remote.assign(w->remote.ctx, w, t);
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->next = t;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

const char *worker_device(const struct worker *w)
{
    return w->device;
}

const struct err *worker_device_error(const struct worker *w)
{
    return atomic_load(&((struct worker *)w)->dev_failed) ? &w->dev_err : NULL;
}

bool worker_device_memory(struct worker *w, uint64_t *allocated, uint64_t *reserved)
{
    if (w->remote.assign)
        return false;
    pthread_mutex_lock(&w->mu);
    struct wdev *d = w->ready ? w->dev : NULL; /* written by the thread before ready; freed after the join */
    pthread_mutex_unlock(&w->mu);
    if (!d)
        return false;
    wdev_memory(d, allocated, reserved);
    return true;
}

int64_t worker_heartbeat_age_ms(const struct worker *w)
{
    if (w->remote.assign)
        return 0;   /* Open MPI ends the world when its process dies; all-reduces have deadlines */
    return train_now_ms() - atomic_load(&((struct worker *)w)->heartbeat);
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
    if (w->remote.assign) {
        free(w);
        return;
    }
    worker_stop(w);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
