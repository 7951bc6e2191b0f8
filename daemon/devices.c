/* devices.c — the CPU from /proc and sysconf, and the GPU list found at start, as JSON. */
#include "devices.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The first "model name" of /proc/cpuinfo, or "" (some architectures have none). */
static void cpu_model(char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (!v)
            break;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        snprintf(out, cap, "%s", v);
        out[strcspn(out, "\n")] = '\0';
        break;
    }
    fclose(f);
}

/* A "Key:   123 kB" line of /proc/meminfo in bytes, or 0. */
static uint64_t meminfo(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    size_t n = strlen(key);
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            if (sscanf(line + n + 1, "%llu", &kb) != 1)
                kb = 0;
            break;
        }
    fclose(f);
    return (uint64_t)kb * 1024;
}

uint64_t devices_self_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long long size = 0, resident = 0;
    int got = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return got == 2 && page > 0 ? (uint64_t)resident * (uint64_t)page : 0;
}

static json_t *gpu_json(const struct devices_gpu *g)
{
    char cc[16], dev[16];
    snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
    snprintf(dev, sizeof dev, "cuda:%d", g->index);
    /* allocated/reserved are the caching allocator's; null until the CUDA backend reports them.
     * A GPU traind leaves alone (--gpus) is not asked for its free memory: that needs a context. */
    return json_pack("{s:s, s:s, s:s, s:i, s:I, s:o, s:n, s:n, s:s, s:b}", "device", dev,
                     "name", g->name, "compute_capability", cc, "sm_count", g->sm_count,
                     "memory_total", (json_int_t)g->mem_total,
                     "memory_free", g->used ? json_integer((json_int_t)g->mem_free) : json_null(),
                     "memory_allocated", "memory_reserved", "pci_bus_id", g->pci_bus_id,
                     "used", g->used);
}

json_t *devices_to_json(const struct devices_info *d)
{
    char model[256];
    cpu_model(model, sizeof model);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    json_t *gpus = json_array();
    for (int i = 0; gpus && i < d->n_gpus; i++)
        json_array_append_new(gpus, gpu_json(&d->gpus[i]));
    return json_pack("{s:{s:s, s:s, s:i, s:I, s:I}, s:o, s:o}",
                     "cpu", "device", "cpu", "model", model, "cores", (int)(cores > 0 ? cores : 1),
                     "memory_total", (json_int_t)meminfo("MemTotal"),
                     "memory_available", (json_int_t)meminfo("MemAvailable"),
                     "gpus", gpus ? gpus : json_array(),
                     "gpu_unavailable", d->n_gpus ? json_null() : json_string(d->gpu_why));
}

/* 12040 -> "12.4"; 0 -> null. */
static json_t *cuda_version(int v)
{
    if (v <= 0)
        return json_null();
    char buf[32];
    snprintf(buf, sizeof buf, "%d.%d", v / 1000, (v % 1000) / 10);
    return json_string(buf);
}

json_t *devices_version_json(const struct devices_info *d, const char *traind_version)
{
    return json_pack("{s:s, s:o, s:o, s:o}", "version", traind_version, "cuda",
                     cuda_version(d->cuda_runtime), "driver", cuda_version(d->cuda_driver),
                     "cublas", cuda_version(d->cublas_version ? d->cublas_version() : 0));
}
