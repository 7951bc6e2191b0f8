/* placement.h — which worker a queued job goes to (place_*), a pure function of the workers and the spec. */
#ifndef TRAIND_DAEMON_PLACEMENT_H
#define TRAIND_DAEMON_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>

#include "spec.h"

enum place_result {
    PLACE_OK,         /* *which is a free worker that may run the job */
    PLACE_WAIT,       /* every worker that may run it is busy */
    PLACE_NO_DEVICE,  /* no worker ever will: why says so ("cuda:3: no such GPU (this machine has 1)") */
};

/*
 * Chooses among n workers named "cpu", "cpu:K" or "cuda:N", or, under mpirun, those of rank R
 * named "rankR/cpu:K" and "rankR/cuda:N" (idle[i]: free now):
 *   "cpu"    → a free CPU worker;
 *   "cuda:N" → the worker named cuda:N (rank 0's);
 *   "auto"   → a free GPU worker (the CUDA backend trains every model and loss), else a free
 *              CPU worker. A busy GPU does not hold an auto job back while a CPU worker is free.
 *   a list   → the first free worker of its devices, in list order; it waits while some exist,
 *              and fails when none does.
 */
enum place_result place_job(const struct job_spec *s, const char *const *names, const bool *idle,
                            size_t n, size_t *which, char *why, size_t why_cap);

/* May the spec's device run on the worker named name? (What place_job would consider.) */
bool place_allows(const struct job_spec *s, const char *name);

/* Is name a GPU worker's ("cuda:N", or "rankR/cuda:N" of another rank)? *index gets N. */
bool place_is_gpu(const char *name, int *index);

#endif
