/* worker.h — a long-lived training thread that runs one task at a time, handed to it by the scheduler. */
#ifndef TRAIND_DAEMON_WORKER_H
#define TRAIND_DAEMON_WORKER_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "err.h"
#include "task.h"

struct backend_factory;

struct worker;

/*
 * Starts the thread with SIGINT/SIGTERM blocked (the loop thread handles signals).
 * cuda_index < 0: a CPU worker. Otherwise a GPU worker: its thread pins itself to the
 * CPUs local to the GPU at pci_bus_id (may be NULL or ""), then creates cuda:cuda_index's
 * backend with gpus (NULL: none can be made) and keeps it for every job; worker_wait_ready waits for that. If it fails, each
 * job the worker is given fails with ERR_DEVICE and the reason.
 */
int worker_start(const char *device, int cuda_index, const char *pci_bus_id,
                 const struct backend_factory *gpus, struct worker **out, struct err *e);

/*
 * Returns once w's backend is made (or could not be), or WORKER_READY_S seconds after since
 * (CLOCK_MONOTONIC), logging it; at once for a CPU worker. Every GPU worker is started
 * first and waited for after, so GPUs make their CUDA contexts at once, not in turn.
 */
void worker_wait_ready(struct worker *w, const struct timespec *since);

/*
 * A worker of another rank of the world (daemon/world.c): no thread here; worker_assign hands
 * its tasks to via->assign, whose side emits each one's DONE when that rank reports it.
 */
struct worker_remote {
    void (*assign)(void *ctx, struct worker *w, struct task *t);
    void *ctx;
};
int worker_start_remote(const char *device, int rank, int index, const struct worker_remote *via,
                        struct worker **out, struct err *e);
/* The rank a worker trains on (0: this process, or traind alone) and its index there. */
int worker_rank(const struct worker *w);
int worker_index(const struct worker *w);

/* Hands t over; the worker must be idle (its last task has emitted DONE). */
void worker_assign(struct worker *w, struct task *t);

const char *worker_device(const struct worker *w);

/* A GPU worker whose backend could not be made, or whose CUDA context was lost: why; NULL otherwise
   (and for CPU workers). */
const struct err *worker_device_error(const struct worker *w);

/* A GPU worker's device memory, from its caching allocator: false when it has no backend. Any thread. */
bool worker_device_memory(struct worker *w, uint64_t *allocated, uint64_t *reserved);

/* Milliseconds since the thread last showed life: every second when idle, every step when training. */
int64_t worker_heartbeat_age_ms(const struct worker *w);

/* Asks the thread to stop after its current task and joins it. Cancel that task first. */
void worker_stop(struct worker *w);
void worker_free(struct worker *w);

#endif
