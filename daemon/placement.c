/* placement.c — the choice of a worker for a job from the workers' names and the spec's device. */
#include "placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool place_is_gpu(const char *name, int *index)
{
    if (strncmp(name, "cuda:", 5) != 0 || !name[5])
        return false;
    char *end;
    long v = strtol(name + 5, &end, 10);
    if (*end || v < 0 || v > SPEC_MAX_CUDA_INDEX)
        return false;
    if (index)
        *index = (int)v;
    return true;
}

/* The first free worker of the kind asked (gpu or not); PLACE_WAIT when there are some but none is free. */
static enum place_result first_free(const char *const *names, const bool *idle, size_t n, bool gpu,
                                    size_t *which, bool *any)
{
    *any = false;
    for (size_t i = 0; i < n; i++) {
        if (place_is_gpu(names[i], NULL) != gpu)
            continue;
        *any = true;
        if (idle[i]) {
            *which = i;
            return PLACE_OK;
        }
    }
    return PLACE_WAIT;
}

enum place_result place_job(const struct job_spec *s, const char *const *names, const bool *idle,
                            size_t n, size_t *which, char *why, size_t why_cap)
{
    bool any;
    if (s->device == SPEC_DEVICE_CUDA) {
        size_t gpus = 0;
        for (size_t i = 0; i < n; i++) {
            int k;
            if (!place_is_gpu(names[i], &k))
                continue;
            gpus++;
            if (k == s->device_index) {
                if (!idle[i])
                    return PLACE_WAIT;
                *which = i;
                return PLACE_OK;
            }
        }
        snprintf(why, why_cap, "cuda:%d: no such GPU (this machine has %zu)", s->device_index, gpus);
        return PLACE_NO_DEVICE;
    }
    if (s->device == SPEC_DEVICE_AUTO && first_free(names, idle, n, true, which, &any) == PLACE_OK)
        return PLACE_OK;
    if (first_free(names, idle, n, false, which, &any) == PLACE_OK)
        return PLACE_OK;
    if (!any) {
        snprintf(why, why_cap, "no CPU worker");
        return PLACE_NO_DEVICE;
    }
    return PLACE_WAIT;
}
