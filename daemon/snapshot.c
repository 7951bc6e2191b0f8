/* snapshot.c — .safetensors checkpoints of a model's parameters plus the data cursor, durable on return. */
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor.h"

#define SNAPSHOT_MAX_HEADER (16u << 20)

bool snapshot_resumable(const struct job_spec *s)
{
    /* Without optimizer state in the file, only an optimizer that keeps none goes on exactly. */
    return s->optimizer.type == SPEC_OPTIM_SGD && s->optimizer.momentum == 0.0;
}

int snapshot_path(const char *dir, int64_t iterations, char *buf, size_t cap, struct err *e)
{
    if (snprintf(buf, cap, "%s/iter-%012" PRId64 ".safetensors", dir, iterations) >= (int)cap)
        return err_set(e, ERR_INVALID_ARG, "checkpoint path under %s is too long", dir);
    return 0;
}

static int make_dir(const char *path, struct err *e)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return err_set(e, ERR_INVALID_ARG, "checkpoint directory path is too long");
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p)
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return err_set(e, ERR_IO, "cannot create %s: %s", buf, strerror(errno));
        if (!c)
            return 0;
        *p = c;
    }
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The JSON header: every parameter's dtype, shape and byte range, and the metadata strings. */
static json_t *header_json(struct nn_model *m, const struct snapshot_meta *meta, size_t *data_bytes)
{
    char it[32], ep[32], bt[32];
    snprintf(it, sizeof it, "%" PRId64, meta->iterations);
    snprintf(ep, sizeof ep, "%" PRIu64, meta->cursor.epoch);
    snprintf(bt, sizeof bt, "%" PRIu64, meta->cursor.batch);
    json_t *h = json_pack("{s:{s:s, s:s, s:s, s:s, s:s, s:s}}", "__metadata__", "format", "pt",
                          "job_id", meta->job_id, "iteration", it, "epoch", ep, "batch", bt,
                          "optimizer_state", "none");
    size_t off = 0;
    for (int i = 0; h && i < nn_num_params(m); i++) {
        struct tensor *t = nn_param(m, i);
        size_t bytes = (size_t)tensor_numel(t) * tensor_dtype_size(t->dtype);
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++)
            json_array_append_new(shape, json_integer(t->shape[d]));
        json_object_set_new(h, nn_param_name(m, i),
                            json_pack("{s:s, s:o, s:[I, I]}", "dtype", t->dtype == TENSOR_F32 ? "F32" : "F64",
                                      "shape", shape, "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + bytes)));
        off += bytes;
    }
    *data_bytes = off;
    return h;
}

/* Every parameter's values in its own dtype, one after another (the layout header_json describes). */
static int pack_data(struct nn_model *m, char *out, struct err *e)
{
    for (int i = 0; i < nn_num_params(m); i++) {
        struct tensor *t = nn_param(m, i);
        size_t n = (size_t)tensor_numel(t);
        double *v = malloc(n * sizeof *v);
        if (!v)
            return err_set(e, ERR_NOMEM, "checkpoint: out of memory");
        if (tensor_copy_to_host_f64(t, v, e)) {
            free(v);
            return e->code;
        }
        if (t->dtype == TENSOR_F32) {
            for (size_t k = 0; k < n; k++) {
                float f = (float)v[k];
                memcpy(out + 4 * k, &f, 4);
            }
            out += 4 * n;
        } else {
            memcpy(out, v, 8 * n);
            out += 8 * n;
        }
        free(v);
    }
    return 0;
}

int snapshot_save(const char *path, struct nn_model *m, const struct snapshot_meta *meta, struct err *e)
{
    char dirbuf[4096], tmp[4200];
    snprintf(dirbuf, sizeof dirbuf, "%s", path);
    const char *dir = dirname(dirbuf);
    if (make_dir(dir, e))
        return e->code;
    size_t data_bytes = 0;
    json_t *h = header_json(m, meta, &data_bytes);
    char *text = h ? json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(h);
    size_t hlen = text ? strlen(text) : 0;
    size_t padded = (hlen + 7) & ~(size_t)7;   /* the data starts 8-byte aligned */
    char *data = text ? malloc(data_bytes ? data_bytes : 1) : NULL;
    if (!data) {
        free(text);
        return err_set(e, ERR_NOMEM, "checkpoint: out of memory");
    }
    if (pack_data(m, data, e)) {
        free(text);
        free(data);
        return e->code;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    uint64_t le = (uint64_t)padded;   /* little-endian on every host traind builds for */
    int rc = fd < 0 || write_all(fd, &le, 8) || write_all(fd, text, hlen) ||
             write_all(fd, "        ", padded - hlen) || write_all(fd, data, data_bytes) || fsync(fd);
    int saved = errno;
    if (fd >= 0 && close(fd) != 0 && !rc) {
        rc = 1;
        saved = errno;
    }
    free(text);
    free(data);
    if (rc || rename(tmp, path) != 0) {
        saved = rc ? saved : errno;
        unlink(tmp);
        return err_set(e, ERR_IO, "writing checkpoint %s: %s", path, strerror(saved));
    }
    /* The rename is durable only once the directory is. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

static int read_file(const char *path, char **out, size_t *len, struct err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        return err_set(e, ERR_IO, "checkpoint %s: %s", path, strerror(saved));
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != (size_t)st.st_size) {
        free(buf);
        return err_set(e, buf ? ERR_IO : ERR_NOMEM, "checkpoint %s: cannot read it", path);
    }
    *out = buf;
    *len = got;
    return 0;
}

static uint64_t meta_u64(const json_t *meta, const char *key)
{
    const char *s = json_string_value(json_object_get(meta, key));
    return s ? strtoull(s, NULL, 10) : 0;
}

/* One parameter of m from the file's bytes, checked against the header's dtype, shape and range. */
static int load_param(struct tensor *t, const char *name, const json_t *info, const char *data,
                      size_t data_len, struct err *e)
{
    const char *dt = json_string_value(json_object_get(info, "dtype"));
    const json_t *shape = json_object_get(info, "shape"), *offs = json_object_get(info, "data_offsets");
    size_t esz = dt && strcmp(dt, "F32") == 0 ? 4 : dt && strcmp(dt, "F64") == 0 ? 8 : 0;
    size_t n = (size_t)tensor_numel(t);
    int fits = esz && json_array_size(shape) == (size_t)t->ndim;
    for (int d = 0; fits && d < t->ndim; d++)
        fits = json_integer_value(json_array_get(shape, (size_t)d)) == t->shape[d];
    json_int_t a = json_integer_value(json_array_get(offs, 0)), b = json_integer_value(json_array_get(offs, 1));
    if (!fits || a < 0 || b < a || (size_t)b > data_len || (size_t)(b - a) != n * esz)
        return err_set(e, ERR_INVALID_DATA, "checkpoint: parameter %s does not fit the model", name);
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return err_set(e, ERR_NOMEM, "checkpoint: out of memory");
    for (size_t k = 0; k < n; k++) {
        if (esz == 4) {
            float f;
            memcpy(&f, data + a + 4 * k, 4);
            v[k] = f;
        } else {
            memcpy(&v[k], data + a + 8 * k, 8);
        }
    }
    int rc = tensor_copy_from_host_f64(t, v, e);
    free(v);
    return rc;
}

int snapshot_load(const char *path, struct nn_model *m, struct snapshot_meta *meta, struct err *e)
{
    char *buf = NULL;
    size_t len = 0;
    if (read_file(path, &buf, &len, e))
        return e->code;
    uint64_t hlen = 0;
    if (len >= 8)
        memcpy(&hlen, buf, 8);
    json_t *h = len >= 8 && hlen <= SNAPSHOT_MAX_HEADER && hlen <= len - 8
                    ? json_loadb(buf + 8, (size_t)hlen, 0, NULL) : NULL;
    int rc = h ? 0 : err_set(e, ERR_INVALID_DATA, "checkpoint %s is not a .safetensors file", path);
    const char *data = buf + 8 + hlen;
    size_t data_len = rc ? 0 : len - 8 - (size_t)hlen;
    for (int i = 0; !rc && i < nn_num_params(m); i++) {
        const char *name = nn_param_name(m, i);
        const json_t *info = json_object_get(h, name);
        rc = info ? load_param(nn_param(m, i), name, info, data, data_len, e)
                  : err_set(e, ERR_INVALID_DATA, "checkpoint %s has no parameter %s", path, name);
    }
    if (!rc) {
        const json_t *md = json_object_get(h, "__metadata__");
        memset(meta, 0, sizeof *meta);
        snprintf(meta->job_id, sizeof meta->job_id, "%s",
                 json_string_value(json_object_get(md, "job_id")) ? json_string_value(json_object_get(md, "job_id")) : "");
        meta->iterations = (int64_t)meta_u64(md, "iteration");
        meta->cursor.epoch = meta_u64(md, "epoch");
        meta->cursor.batch = meta_u64(md, "batch");
    }
    json_decref(h);
    free(buf);
    return rc;
}
