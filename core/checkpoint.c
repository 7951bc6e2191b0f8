/* checkpoint.c — the safetensors writer: model + optimizer state, temp file, fsync, rename. */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "tensor_impl.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c writes the host's bytes as safetensors' little-endian data"
#endif

#include "checkpoint_impl.h"

int ckpt_entries(struct nn_model *m, struct optim *o, struct ckpt_entry **out, int *n,
                        struct err *e)
{
    int np = nn_num_params(m), ns = optim_num_states(o);
    struct ckpt_entry *en = calloc((size_t)(np * (1 + ns) + 1), sizeof *en);
    if (!en)
        return err_set(e, ERR_NOMEM, "checkpoint: out of host memory");
    struct tensor *flat = nn_params_flat(m);
    int k = 0;
    for (int s = -1; s < ns; s++) {
        const char *sname = NULL;
        struct tensor *state = s < 0 ? flat : optim_state(o, s, &sname);
        for (int i = 0; i < np; i++) {
            struct tensor *p = nn_param(m, i);
            if (s < 0)
                snprintf(en[k].name, CKPT_NAME, "%s", nn_param_name(m, i));
            else
                snprintf(en[k].name, CKPT_NAME, "optim.%s.%s", sname, nn_param_name(m, i));
            tensor_header_contig(&en[k].view, state, p->ndim, p->shape);
            en[k].view.data = state->data + (p->data - flat->data);
            k++;
        }
    }
    *out = en;
    *n = k;
    return 0;
}

size_t ckpt_entry_bytes(const struct ckpt_entry *en)
{
    return (size_t)tensor_numel(&en->view) * tensor_dtype_size(en->view.dtype);
}

static const char *st_dtype(enum tensor_dtype dt)
{
    return dt == TENSOR_F64 ? "F64" : "F32";
}

/* ---- writing ---- */

static int add_meta(json_t *md, const char *key, const char *value, struct err *e)
{
    if (json_object_set_new(md, key, json_string(value)))
        return err_set(e, ERR_INVALID_ARG, "ckpt_save: metadata %.64s is not valid UTF-8", key);
    return 0;
}

/* The JSON header, padded with spaces so the data starts 8-byte aligned. */
static char *build_header(const struct ckpt_entry *en, int n, struct optim *o,
                          const struct ckpt_kv *meta, int n_meta, size_t *len, struct err *e)
{
    json_t *root = json_object(), *md = json_object();
    char *text = NULL, *padded = NULL;
    int rc = !root || !md ? err_set(e, ERR_NOMEM, "ckpt_save: out of host memory") : 0;
    for (int i = 0; !rc && i < n_meta; i++) {
        if (!meta[i].key || !meta[i].value || strncmp(meta[i].key, "optim.", 6) == 0)
            rc = err_set(e, ERR_INVALID_ARG, "ckpt_save: metadata key %.64s is NULL or reserved",
                         meta[i].key ? meta[i].key : "(null)");
        else
            rc = add_meta(md, meta[i].key, meta[i].value, e);
    }
    /* what safetensors.torch and transformers write for a PyTorch state_dict */
    if (!rc && !json_object_get(md, "format"))
        rc = add_meta(md, "format", "pt", e);
    if (!rc && o) {
        char steps[32], names[64] = "";
        snprintf(steps, sizeof steps, "%lld", (long long)optim_steps(o));
        for (int s = 0; s < optim_num_states(o); s++) {
            const char *sn;
            optim_state(o, s, &sn);
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", s ? "," : "", sn);
        }
        rc = add_meta(md, "optim.type", optim_kind_name(optim_kind_of(o)), e);
        if (!rc)
            rc = add_meta(md, "optim.step", steps, e);
        if (!rc)
            rc = add_meta(md, "optim.state", names, e);
    }
    if (!rc && json_object_set_new(root, "__metadata__", md) == 0) {
        md = NULL;
        uint64_t off = 0;
        for (int i = 0; !rc && i < n; i++) {
            json_t *shape = json_array(), *t = json_object();
            for (int d = 0; shape && d < en[i].view.ndim; d++)
                json_array_append_new(shape, json_integer(en[i].view.shape[d]));
            uint64_t end = off + ckpt_entry_bytes(&en[i]);
            if (!shape || !t ||
                json_object_set_new(t, "dtype", json_string(st_dtype(en[i].view.dtype))) ||
                json_object_set_new(t, "shape", shape) ||
                json_object_set_new(t, "data_offsets",
                                    json_pack("[II]", (json_int_t)off, (json_int_t)end)) ||
                json_object_set_new(root, en[i].name, t))
                rc = err_set(e, ERR_NOMEM, "ckpt_save: cannot build the header");
            off = end;
        }
    } else if (!rc) {
        rc = err_set(e, ERR_NOMEM, "ckpt_save: cannot build the header");
    }
    if (!rc && !(text = json_dumps(root, JSON_COMPACT)))
        rc = err_set(e, ERR_NOMEM, "ckpt_save: cannot serialise the header");
    if (!rc) {
        size_t tl = strlen(text), pl = (tl + 7) / 8 * 8;
        if (!(padded = malloc(pl + 1))) {
            rc = err_set(e, ERR_NOMEM, "ckpt_save: out of host memory");
        } else {
            memcpy(padded, text, tl);
            memset(padded + tl, ' ', pl - tl);
            padded[pl] = '\0';
            *len = pl;
        }
    }
    free(text);
    json_decref(md);
    json_decref(root);
    return padded;
}

static int write_all(FILE *f, const void *p, size_t n, const char *tmp, struct err *e)
{
    if (n && fwrite(p, 1, n, f) != n)
        return err_set(e, ERR_IO, "ckpt_save: writing %s: %s", tmp, strerror(errno));
    return 0;
}

static int fsync_dir(const char *path, struct err *e)
{
    char *copy = strdup(path);
    if (!copy)
        return err_set(e, ERR_NOMEM, "ckpt_save: out of host memory");
    const char *dir = dirname(copy);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
    if (fd < 0 || fsync(fd) != 0)
        rc = err_set(e, ERR_IO, "ckpt_save: syncing directory %s: %s", dir, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(copy);
    return rc;
}

static int write_file(FILE *f, const char *tmp, const struct ckpt_entry *en, int n, const char *hdr,
                      size_t hlen, struct err *e)
{
    uint64_t len = hlen;
    int rc = write_all(f, &len, 8, tmp, e);
    if (!rc)
        rc = write_all(f, hdr, hlen, tmp, e);
    for (int i = 0; !rc && i < n; i++) {
        size_t bytes = ckpt_entry_bytes(&en[i]);
        void *host = malloc(bytes ? bytes : 1);
        const struct backend *be = en[i].view.be;
        if (!host)
            rc = err_set(e, ERR_NOMEM, "ckpt_save: out of host memory");
        else if (!(rc = be->to_host(be, host, en[i].view.data, bytes, e)))
            rc = write_all(f, host, bytes, tmp, e);
        free(host);
    }
    if (!rc && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        rc = err_set(e, ERR_IO, "ckpt_save: syncing %s: %s", tmp, strerror(errno));
    return rc;
}

int ckpt_save(const char *path, struct nn_model *m, struct optim *o, const struct ckpt_kv *meta,
              int n_meta, struct err *e)
{
    struct ckpt_entry *en = NULL;
    int n = 0;
    size_t hlen = 0;
    if (!path || !m || (n_meta && !meta))
        return err_set(e, ERR_INVALID_ARG, "ckpt_save: NULL argument");
    int rc = ckpt_entries(m, o, &en, &n, e);
    if (rc)
        return rc;
    char *hdr = build_header(en, n, o, meta, n_meta, &hlen, e);
    size_t tl = strlen(path) + 16;
    char *tmp = hdr ? malloc(tl) : NULL;
    if (!hdr || !tmp) {
        rc = hdr ? err_set(e, ERR_NOMEM, "ckpt_save: out of host memory") : e ? e->code : ERR_NOMEM;
        goto out;
    }
    snprintf(tmp, tl, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        rc = err_set(e, ERR_IO, "ckpt_save: creating a temp file beside %s: %s", path,
                     strerror(errno));
        goto out;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        rc = err_set(e, ERR_IO, "ckpt_save: %s: %s", tmp, strerror(errno));
    } else {
        rc = write_file(f, tmp, en, n, hdr, hlen, e);
        if (fclose(f) != 0 && !rc)
            rc = err_set(e, ERR_IO, "ckpt_save: closing %s: %s", tmp, strerror(errno));
    }
    if (!rc && chmod(tmp, 0644) != 0)
        rc = err_set(e, ERR_IO, "ckpt_save: chmod %s: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) != 0)
        rc = err_set(e, ERR_IO, "ckpt_save: renaming %s to %s: %s", tmp, path, strerror(errno));
    if (rc)
        unlink(tmp);
    else
        rc = fsync_dir(path, e);
out:
    free(tmp);
    free(hdr);
    free(en);
    return rc;
}
