/* placement.c — the choice of a worker for a job from the workers' names and the spec's device. */
#include "placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A worker of another rank is named rankR/ and the device's name there: that name, or NULL. */
static const char *remote_part(const char *name)
{
    if (strncmp(name, "rank", 4) != 0)
        return NULL;
    const char *p = name + 4;
    while (*p >= '0' && *p <= '9')
        p++;
    return p > name + 4 && *p == '/' ? p + 1 : NULL;
}

bool place_is_gpu(const char *name, int *index)
{
    const char *there = remote_part(name);
    name = there ? there : name;
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

/* The first idle worker named cuda:index on any rank, else the first such one, else n. */
static size_t gpu_worker(const char *const *names, const bool *idle, size_t n, int index)
{
    size_t first = n;
    for (size_t i = 0; i < n; i++) {
        int k;
        if (!place_is_gpu(names[i], &k) || k != index)
            continue;
        if (idle[i])
            return i;
        first = first < n ? first : i;
    }
    return first;
}

static bool list_has_cpu(const struct job_spec *s)
{
    for (int i = 0; i < s->n_devices; i++)
        if (s->devices[i].kind == SPEC_DEVICE_CPU)
            return true;
    return false;
}

bool place_allows(const struct job_spec *s, const char *name)
{
    int k;
    bool gpu = place_is_gpu(name, &k);
    switch (s->device) {
    case SPEC_DEVICE_CPU: return !gpu;
    case SPEC_DEVICE_CUDA: return gpu && k == s->device_index;
    case SPEC_DEVICE_AUTO: return true;
    case SPEC_DEVICE_LIST: break;
    }
    for (int i = 0; i < s->n_devices; i++)
        if (gpu ? s->devices[i].kind == SPEC_DEVICE_CUDA && s->devices[i].index == k
                : s->devices[i].kind == SPEC_DEVICE_CPU)
            return true;
    return false;
}

/* "cuda:2, cuda:5: no such GPU (this machine has 1)" for a list none of whose devices exists. */
static void list_missing(const struct job_spec *s, size_t gpus, char *why, size_t cap)
{
    size_t len = 0;
    why[0] = '\0';
    for (int i = 0; i < s->n_devices && len < cap; i++) {
        int n = s->devices[i].kind == SPEC_DEVICE_CPU
                    ? snprintf(why + len, cap - len, "%scpu", i ? ", " : "")
                    : snprintf(why + len, cap - len, "%scuda:%d", i ? ", " : "", s->devices[i].index);
        len = n < 0 ? cap : len + (size_t)n;
    }
    if (len < cap)
        snprintf(why + len, cap - len, ": %s (this machine has %zu)",
                 list_has_cpu(s) ? "no such device" : "no such GPU", gpus);
}

static enum place_result place_list(const struct job_spec *s, const char *const *names,
                                    const bool *idle, size_t n, size_t *which, char *why,
                                    size_t why_cap)
{
    bool exists = false;
    for (int i = 0; i < s->n_devices; i++) {
        const struct spec_device_ref *d = &s->devices[i];
        if (d->kind == SPEC_DEVICE_CPU) {
            bool any;
            if (first_free(names, idle, n, false, which, &any) == PLACE_OK)
                return PLACE_OK;
            exists = exists || any;
            continue;
        }
        size_t w = gpu_worker(names, idle, n, d->index);
        if (w == n)
            continue;
        exists = true;
        if (idle[w]) {
            *which = w;
            return PLACE_OK;
        }
    }
    if (exists)
        return PLACE_WAIT;
    size_t gpus = 0;
    for (size_t i = 0; i < n; i++)
        gpus += place_is_gpu(names[i], NULL);
    list_missing(s, gpus, why, why_cap);   /* a world's GPUs of every rank, none of them a listed one */
    return PLACE_NO_DEVICE;
}

enum place_result place_job(const struct job_spec *s, const char *const *names, const bool *idle,
                            size_t n, size_t *which, char *why, size_t why_cap)
{
    bool any;
    if (s->device == SPEC_DEVICE_LIST)
        return place_list(s, names, idle, n, which, why, why_cap);
    if (s->device == SPEC_DEVICE_CUDA) {
        size_t gpus = 0;
        for (size_t i = 0; i < n; i++) {
            int k;
            if (remote_part(names[i]) || !place_is_gpu(names[i], &k))
                continue;   /* one named GPU is rank 0's: a job of one replica runs there */
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
