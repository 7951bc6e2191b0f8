/* checkpoint_read.c — the safetensors reader: validates the whole file, then loads a model and
 * optimizer from it. A file is never trusted: every length, offset, dtype and shape is checked. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "checkpoint_impl.h"

/* One tensor as the header describes it. */
struct ckpt_rec {
    const char *name;        /* borrowed from the JSON */
    enum tensor_dtype dt;
    int ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    uint64_t begin, end;     /* relative to the data section */
    bool used;
};

struct ckpt_meta {
    int n;
    char **key, **value;
};

/* ERR_INVALID_DATA naming the file; needs `path` and `e` in scope. */
#define BAD(...) bad_data(e, path, __VA_ARGS__)

static int bad_data(struct err *e, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad_data(struct err *e, const char *path, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_set(e, ERR_INVALID_DATA, "checkpoint %s: %s", path, msg);
}

static int parse_dtype(const char *s, enum tensor_dtype *dt)
{
    if (s && strcmp(s, "F64") == 0)
        *dt = TENSOR_F64;
    else if (s && strcmp(s, "F32") == 0)
        *dt = TENSOR_F32;
    else
        return -1;
    return 0;
}

/* Fills r from the header entry v, checking types, ranges and size consistency. */
static int parse_rec(const char *path, const char *name, json_t *v, uint64_t data_size,
                     struct ckpt_rec *r, struct err *e)
{
    json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
           *offs = json_object_get(v, "data_offsets");
    r->name = name;
    if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs) ||
        json_array_size(offs) != 2 || json_object_size(v) != 3)
        return BAD("tensor '%.64s' needs exactly dtype, shape and data_offsets", name);
    if (parse_dtype(json_string_value(dt), &r->dt))
        return BAD("tensor '%.64s' has a dtype other than F32 or F64", name);
    if (json_array_size(shape) > TENSOR_MAX_DIMS)
        return BAD("tensor '%.64s' has %zu dimensions (at most %d)", name,
                   json_array_size(shape), TENSOR_MAX_DIMS);
    r->ndim = (int)json_array_size(shape);
    uint64_t numel = 1;
    for (int d = 0; d < r->ndim; d++) {
        json_t *s = json_array_get(shape, (size_t)d);
        if (!json_is_integer(s) || json_integer_value(s) < 0 ||
            json_integer_value(s) > (json_int_t)(UINT64_MAX / 8))
            return BAD("tensor '%.64s': dimension %d is not a size", name, d);
        r->shape[d] = json_integer_value(s);
        if (r->shape[d] && numel > UINT64_MAX / 8 / (uint64_t)r->shape[d])
            return BAD("tensor '%.64s': shape too large", name);
        numel *= (uint64_t)r->shape[d];
    }
    json_t *b = json_array_get(offs, 0), *en = json_array_get(offs, 1);
    if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < json_integer_value(b))
        return BAD("tensor '%.64s': data_offsets are not [begin, end] with begin <= end", name);
    r->begin = (uint64_t)json_integer_value(b);
    r->end = (uint64_t)json_integer_value(en);
    if (r->end > data_size)
        return BAD("tensor '%.64s': data_offsets end %" PRIu64 " is past the data (%" PRIu64
                   " bytes)", name, r->end, data_size);
    if (r->end - r->begin != numel * tensor_dtype_size(r->dt))
        return BAD("tensor '%.64s': %" PRIu64 " bytes of data for %" PRIu64 " elements of %s",
                   name, r->end - r->begin, numel, tensor_dtype_name(r->dt));
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const struct ckpt_rec *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

void ckpt_meta_free(struct ckpt_meta *md)
{
    if (!md)
        return;
    for (int i = 0; i < md->n; i++) {
        free(md->key[i]);
        free(md->value[i]);
    }
    free(md->key);
    free(md->value);
    free(md);
}

static int parse_meta(const char *path, json_t *m, struct ckpt_meta **out, struct err *e)
{
    struct ckpt_meta *md = calloc(1, sizeof *md);
    size_t n = m ? json_object_size(m) : 0;
    if (m && !json_is_object(m)) {
        free(md);
        return BAD("__metadata__ is not an object");
    }
    if (!md || !(md->key = calloc(n + 1, sizeof(char *))) || !(md->value = calloc(n + 1, sizeof(char *)))) {
        ckpt_meta_free(md);
        return err_set(e, ERR_NOMEM, "ckpt_load: out of host memory");
    }
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!json_is_string(v)) {
            ckpt_meta_free(md);
            return BAD("__metadata__ value of '%.64s' is not a string", k);
        }
        md->key[md->n] = strdup(k);
        md->value[md->n] = strdup(json_string_value(v));
        if (!md->key[md->n] || !md->value[md->n++]) {
            ckpt_meta_free(md);
            return err_set(e, ERR_NOMEM, "ckpt_load: out of host memory");
        }
    }
    *out = md;
    return 0;
}

const char *ckpt_meta_get(const struct ckpt_meta *md, const char *key)
{
    for (int i = 0; md && key && i < md->n; i++)
        if (strcmp(md->key[i], key) == 0)
            return md->value[i];
    return NULL;
}

int ckpt_meta_count(const struct ckpt_meta *md)
{
    return md ? md->n : 0;
}

const char *ckpt_meta_key(const struct ckpt_meta *md, int i)
{
    return md && i >= 0 && i < md->n ? md->key[i] : NULL;
}

const char *ckpt_meta_value(const struct ckpt_meta *md, int i)
{
    return md && i >= 0 && i < md->n ? md->value[i] : NULL;
}

/* The header's records, validated and checked for overlaps. */
static int parse_header(const char *path, json_t *root, uint64_t data_size, struct ckpt_rec **out,
                        int *n_out, json_t **meta, struct err *e)
{
    if (!json_is_object(root))
        return BAD("header is not a JSON object");
    size_t cap = json_object_size(root);
    struct ckpt_rec *r = calloc(cap + 1, sizeof *r);
    if (!r)
        return err_set(e, ERR_NOMEM, "ckpt_load: out of host memory");
    int n = 0, rc = 0;
    const char *k;
    json_t *v;
    *meta = NULL;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "__metadata__") == 0) {
            *meta = v;
            continue;
        }
        if ((rc = parse_rec(path, k, v, data_size, &r[n++], e)))
            break;
    }
    if (!rc) {
        qsort(r, (size_t)n, sizeof *r, cmp_begin);
        for (int i = 1; i < n && !rc; i++)
            if (r[i].begin < r[i - 1].end)
                rc = BAD("tensors '%.64s' and '%.64s' overlap", r[i - 1].name, r[i].name);
    }
    if (rc) {
        free(r);
        return rc;
    }
    *out = r;
    *n_out = n;
    return 0;
}

static struct ckpt_rec *find(struct ckpt_rec *r, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(r[i].name, name) == 0)
            return &r[i];
    return NULL;
}

/* Each entry of the model (+ optimizer) has a record with its dtype and shape. */
static int match(const char *path, struct ckpt_entry *en, int n_en, struct ckpt_rec *r, int n,
                 struct ckpt_rec **which, struct err *e)
{
    char s1[64];
    for (int i = 0; i < n_en; i++) {
        const struct tensor *t = &en[i].view;
        struct ckpt_rec *x = find(r, n, en[i].name);
        if (!x)
            return BAD("no tensor '%.64s'", en[i].name);
        if (x->dt != t->dtype)
            return BAD("tensor '%.64s' is %s, the model's is %s", en[i].name,
                       tensor_dtype_name(x->dt), tensor_dtype_name(t->dtype));
        bool same = x->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = x->shape[d] == t->shape[d];
        if (!same)
            return BAD("tensor '%.64s' does not have the model's shape %s", en[i].name,
                       tensor_shape_str(t, s1, sizeof s1));
        x->used = true;
        which[i] = x;
    }
    return 0;
}

/* o's type and step count from the metadata. */
static int optim_meta(const char *path, const struct ckpt_meta *md, struct optim *o,
                      int64_t *steps, struct err *e)
{
    const char *type = ckpt_meta_get(md, "optim.type"), *st = ckpt_meta_get(md, "optim.step");
    const char *want = optim_kind_name(optim_kind_of(o));
    if (!type || strcmp(type, want) != 0)
        return BAD("no %s optimizer state (optim.type is %s)", want, type ? "another" : "missing");
    char *end;
    errno = 0;
    long long v = st ? strtoll(st, &end, 10) : -1;
    if (!st || errno || *end || end == st || v < 0)
        return BAD("optim.step is missing or not a count");
    *steps = v;
    return 0;
}

static int read_at(int fd, void *dst, size_t n, uint64_t off, const char *path, struct err *e)
{
    char *p = dst;
    while (n) {
        ssize_t got = pread(fd, p, n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return err_set(e, got < 0 ? ERR_IO : ERR_INVALID_DATA, "checkpoint %s: %s", path,
                           got < 0 ? strerror(errno) : "file shrank while reading");
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return 0;
}

/* The one bound on a header's length, for files and images in memory alike. */
static int check_header_len(const char *path, uint64_t hlen, uint64_t size, struct err *e)
{
    if (hlen < 2 || hlen > size - 8 || hlen > CKPT_MAX_HEADER)
        return BAD("header length %" PRIu64 " does not fit the file (%" PRIu64 " bytes, at most "
                   "%u of header)", hlen, size, CKPT_MAX_HEADER);
    return 0;
}

/* Reads and validates the header of the open file fd of size bytes. */
static int read_header(int fd, const char *path, uint64_t size, json_t **root, uint64_t *data_off,
                       struct err *e)
{
    uint64_t hlen;
    if (size < 8)
        return BAD("%" PRIu64 " bytes, too short for the 8-byte header length", size);
    int rc = read_at(fd, &hlen, 8, 0, path, e);
    if (rc)
        return rc;
    if ((rc = check_header_len(path, hlen, size, e)))
        return rc;
    char *buf = malloc(hlen);
    if (!buf)
        return err_set(e, ERR_NOMEM, "ckpt_load: out of host memory");
    if ((rc = read_at(fd, buf, hlen, 8, path, e))) {
        free(buf);
        return rc;
    }
    json_error_t je;
    *root = json_loadb(buf, hlen, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!*root)   /* the position only: messages never echo file contents */
        return BAD("header is not valid JSON (byte %d of the header)", je.position);
    *data_off = 8 + hlen;
    return 0;
}

/* Every entry's bytes, laid out one after the other in stage, into its tensor. */
static int upload_stage(const struct ckpt_entry *en, int n_en, const char *stage, struct err *e)
{
    for (int i = 0; i < n_en; i++) {
        const struct backend *be = en[i].view.be;
        int rc = be->from_host(be, en[i].view.data, stage, ckpt_entry_bytes(&en[i]), e);
        if (rc)
            return rc;
        stage += ckpt_entry_bytes(&en[i]);
    }
    return 0;
}

/* Copies every matched record's bytes into its entry; all were validated before. */
static int load_data(int fd, const char *path, uint64_t data_off, struct ckpt_entry *en, int n_en,
                     struct ckpt_rec **which, struct err *e)
{
    size_t total = 0;
    for (int i = 0; i < n_en; i++)
        total += ckpt_entry_bytes(&en[i]);
    char *stage = malloc(total ? total : 1), *p = stage;
    if (!stage)
        return err_set(e, ERR_NOMEM, "ckpt_load: out of host memory");
    int rc = 0;
    for (int i = 0; !rc && i < n_en; i++) {   /* read everything before changing anything */
        rc = read_at(fd, p, ckpt_entry_bytes(&en[i]), data_off + which[i]->begin, path, e);
        p += ckpt_entry_bytes(&en[i]);
    }
    if (!rc)
        rc = upload_stage(en, n_en, stage, e);
    free(stage);
    return rc;
}

/* path opened for reading, a regular file, and its size; -1 (e set) when it is not. */
static int open_file(const char *path, uint64_t *size, struct err *e)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_set(e, ERR_IO, "ckpt_load: %s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err_set(e, ERR_IO, "ckpt_load: %s: not a readable regular file", path);
        close(fd);
        return -1;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}

int ckpt_meta_read(const char *path, struct ckpt_meta **meta, struct err *e)
{
    *meta = NULL;
    if (!path)
        return err_set(e, ERR_INVALID_ARG, "ckpt_meta_read: NULL argument");
    uint64_t size, data_off = 0;
    int fd = open_file(path, &size, e);
    if (fd < 0)
        return e->code;
    json_t *root = NULL, *jmeta;
    struct ckpt_rec *r = NULL;
    int n = 0;
    int rc = read_header(fd, path, size, &root, &data_off, e);
    if (!rc)
        rc = parse_header(path, root, size - data_off, &r, &n, &jmeta, e);
    if (!rc)
        rc = parse_meta(path, jmeta, meta, e);
    close(fd);
    free(r);
    json_decref(root);
    return rc;
}

int ckpt_load(const char *path, struct nn_model *m, struct optim *o, struct ckpt_meta **meta,
              struct err *e)
{
    struct ckpt_entry *en = NULL;
    struct ckpt_rec *r = NULL, **which = NULL;
    struct ckpt_meta *md = NULL;
    json_t *root = NULL, *jmeta;
    int n_en = 0, n = 0, rc;
    uint64_t data_off = 0;
    int64_t steps = 0;
    uint64_t size;
    if (meta)
        *meta = NULL;
    if (!path || !m)
        return err_set(e, ERR_INVALID_ARG, "ckpt_load: NULL argument");
    int fd = open_file(path, &size, e);
    if (fd < 0)
        return e->code;
    if ((rc = read_header(fd, path, size, &root, &data_off, e)) ||
        (rc = parse_header(path, root, size - data_off, &r, &n, &jmeta, e)) ||
        (rc = parse_meta(path, jmeta, &md, e)) || (rc = ckpt_entries(m, o, &en, &n_en, e)))
        goto out;
    if (!(which = calloc((size_t)n_en + 1, sizeof *which))) {
        rc = err_set(e, ERR_NOMEM, "ckpt_load: out of host memory");
        goto out;
    }
    if ((o && (rc = optim_meta(path, md, o, &steps, e))) ||
        (rc = match(path, en, n_en, r, n, which, e)))
        goto out;
    for (int i = 0; i < n; i++)   /* strict, as load_state_dict: nothing unexpected */
        if (!r[i].used && (o || strncmp(r[i].name, "optim.", 6) != 0)) {
            rc = BAD("unexpected tensor '%.64s' for this model", r[i].name);
            goto out;
        }
    if ((rc = load_data(fd, path, data_off, en, n_en, which, e)))
        goto out;
    if (o)
        rc = optim_set_steps(o, steps, e);
    if (!rc && meta) {
        *meta = md;
        md = NULL;
    }
out:
    close(fd);
    ckpt_meta_free(md);
    json_decref(root);
    free(which);
    free(r);
    free(en);
    return rc;
}

/* ---- parameters only, from memory, converting dtypes (load_state_dict) ---- */

static const char *rec_shape(const struct ckpt_rec *x, char *buf, size_t cap)
{
    struct tensor t = {.ndim = x->ndim};
    memcpy(t.shape, x->shape, sizeof x->shape);
    return tensor_shape_str(&t, buf, cap);
}

/*
 * Every parameter has a record of its shape, and every record (optimizer state aside) is a
 * parameter: PyTorch's strict load_state_dict, checked in its order (missing, unexpected, size).
 */
static int match_params(const char *path, struct ckpt_entry *en, int n_en, struct ckpt_rec *r, int n,
                        struct ckpt_rec **which, struct err *e)
{
    for (int i = 0; i < n_en; i++)
        if (!(which[i] = find(r, n, en[i].name)))
            return BAD("missing key '%.64s': the model has it, the file does not", en[i].name);
        else
            which[i]->used = true;
    for (int i = 0; i < n; i++)
        if (!r[i].used && strncmp(r[i].name, "optim.", 6) != 0)
            return BAD("unexpected key '%.64s': the file has it, the model does not", r[i].name);
    char s1[64], s2[64];
    for (int i = 0; i < n_en; i++) {
        const struct tensor *t = &en[i].view;
        bool same = which[i]->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = which[i]->shape[d] == t->shape[d];
        if (!same)
            return BAD("size mismatch for %.64s: copying a param with shape %s from the file, the shape "
                       "in the current model is %s", en[i].name, rec_shape(which[i], s1, sizeof s1),
                       tensor_shape_str(t, s2, sizeof s2));
    }
    return 0;
}

/* The record's elements as dst's dtype (float32 <-> float64 as torch's copy_ does); src may be unaligned. */
static void convert(void *dst, enum tensor_dtype to, const char *src, enum tensor_dtype from, size_t count)
{
    if (to == from) {
        memcpy(dst, src, count * tensor_dtype_size(to));
        return;
    }
    for (size_t i = 0; i < count; i++) {
        if (from == TENSOR_F32) {
            float f;
            memcpy(&f, src + i * sizeof f, sizeof f);
            ((double *)dst)[i] = (double)f;
        } else {
            double d;
            memcpy(&d, src + i * sizeof d, sizeof d);
            ((float *)dst)[i] = (float)d;
        }
    }
}

int ckpt_load_params_mem(const void *buf, size_t len, const char *path, struct nn_model *m,
                         struct err *e)
{
    const char *bytes = buf;
    uint64_t hlen = 0;
    if (!m || (!buf && len) || !path)
        return err_set(e, ERR_INVALID_ARG, "ckpt_load_params_mem: NULL argument");
    if (len < 8)
        return BAD("%zu bytes, too short for the 8-byte header length", len);
    memcpy(&hlen, bytes, 8);
    int rc = check_header_len(path, hlen, len, e);
    if (rc)
        return rc;
    json_error_t je;
    json_t *root = json_loadb(bytes + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je), *jmeta;
    if (!root)   /* the position only: messages never echo file contents */
        return BAD("header is not valid JSON (byte %d of the header)", je.position);
    const char *data = bytes + 8 + hlen;
    struct ckpt_entry *en = NULL;
    struct ckpt_rec *r = NULL, **which = NULL;
    char *stage = NULL;
    int n = 0, n_en = 0;
    if ((rc = parse_header(path, root, len - 8 - hlen, &r, &n, &jmeta, e)) ||
        (rc = ckpt_entries(m, NULL, &en, &n_en, e)))
        goto out;
    size_t total = 0;
    for (int i = 0; i < n_en; i++)
        total += ckpt_entry_bytes(&en[i]);
    if (!(which = calloc((size_t)n_en + 1, sizeof *which)) || !(stage = malloc(total ? total : 1))) {
        rc = err_set(e, ERR_NOMEM, "ckpt_load_params_mem: out of host memory");
        goto out;
    }
    if ((rc = match_params(path, en, n_en, r, n, which, e)))
        goto out;
    char *p = stage;   /* everything converted before anything changes */
    for (int i = 0; i < n_en; i++) {
        convert(p, en[i].view.dtype, data + which[i]->begin, which[i]->dt,
                (size_t)tensor_numel(&en[i].view));
        p += ckpt_entry_bytes(&en[i]);
    }
    rc = upload_stage(en, n_en, stage, e);
out:
    free(stage);
    free(which);
    free(en);
    free(r);
    json_decref(root);
    return rc;
}
