/* snapshot.c — job checkpoints through core's ckpt_ (model + optimizer), with the run's metadata. */
#include "snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "fsutil.h"
#include "tensor.h"

int snapshot_path(const char *dir, int64_t iterations, char *buf, size_t cap, struct err *e)
{
    if (snprintf(buf, cap, "%s/iter-%012" PRId64 ".safetensors", dir, iterations) >= (int)cap)
        return err_set(e, ERR_INVALID_ARG, "checkpoint path under %s is too long", dir);
    return 0;
}

int snapshot_save(const char *path, struct nn_model *m, struct optim *o, const struct snapshot_meta *meta,
                  struct err *e)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    if (fs_mkdirs(dirname(dir), e))
        return e->code;
    char v[6][32];
    snprintf(v[0], sizeof v[0], "%" PRId64, meta->iterations);
    snprintf(v[1], sizeof v[1], "%" PRIu64, meta->cursor.epoch);
    snprintf(v[2], sizeof v[2], "%" PRIu64, meta->cursor.batch);
    snprintf(v[3], sizeof v[3], "%" PRId64, meta->features);
    snprintf(v[4], sizeof v[4], "%" PRId64, meta->outputs);
    snprintf(v[5], sizeof v[5], "%" PRId64, meta->epoch_iterations);
    const struct ckpt_kv kv[] = {
        {"job_id", meta->job_id}, {"iteration", v[0]}, {"epoch", v[1]}, {"batch", v[2]},
        {"features", v[3]}, {"outputs", v[4]}, {"epoch_iterations", v[5]},
    };
    return ckpt_save(path, m, o, kv, (int)(sizeof kv / sizeof *kv), e);
}

static int64_t number(const char *s)
{
    return s ? strtoll(s, NULL, 10) : 0;
}

/* Fills meta from a checkpoint's metadata. */
static void fill(struct snapshot_meta *meta, const struct ckpt_meta *md)
{
    memset(meta, 0, sizeof *meta);
    const char *id = ckpt_meta_get(md, "job_id");
    snprintf(meta->job_id, sizeof meta->job_id, "%s", id ? id : "");
    meta->iterations = number(ckpt_meta_get(md, "iteration"));
    meta->cursor.epoch = (uint64_t)number(ckpt_meta_get(md, "epoch"));
    meta->cursor.batch = (uint64_t)number(ckpt_meta_get(md, "batch"));
    meta->features = number(ckpt_meta_get(md, "features"));
    meta->outputs = number(ckpt_meta_get(md, "outputs"));
    meta->epoch_iterations = number(ckpt_meta_get(md, "epoch_iterations"));
}

int snapshot_load(const char *path, struct nn_model *m, struct optim *o, struct snapshot_meta *meta,
                  struct err *e)
{
    struct ckpt_meta *md = NULL;
    if (ckpt_load(path, m, o, meta ? &md : NULL, e))
        return e->code;
    if (meta)
        fill(meta, md);
    ckpt_meta_free(md);
    return 0;
}

int snapshot_peek(const char *path, struct snapshot_meta *meta, struct err *e)
{
    struct ckpt_meta *md;
    if (ckpt_meta_read(path, &md, e))
        return e->code;
    fill(meta, md);
    ckpt_meta_free(md);
    return 0;
}

int snapshot_sweep(const char *dir, const char *keep, int *removed, struct err *e)
{
    *removed = 0;
    const char *kept = keep ? strrchr(keep, '/') : NULL;
    kept = kept ? kept + 1 : keep;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : err_set(e, ERR_IO, "checkpoints in %s: %s", dir, strerror(errno));
    int rc = 0;
    for (struct dirent *de; (de = readdir(d));) {
        char path[4500];
        if (de->d_name[0] == '.' || (kept && strcmp(de->d_name, kept) == 0))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (unlink(path) == 0)
            (*removed)++;
        else if (errno != ENOENT && !rc)
            rc = err_set(e, ERR_IO, "cannot remove %s: %s", path, strerror(errno));
    }
    closedir(d);
    return rc;
}
