/* checkpoint.h — model and optimizer state to and from .safetensors files. */
#ifndef TRAIND_CORE_CHECKPOINT_H
#define TRAIND_CORE_CHECKPOINT_H

#include "nn.h"
#include "optim.h"

/*
 * Format (https://github.com/huggingface/safetensors): u64 little-endian header length,
 * a JSON header {"name": {"dtype": "F64"|"F32", "shape": [...], "data_offsets": [begin, end]},
 * "__metadata__": {string: string}} padded with spaces to 8-byte alignment, then the raw
 * little-endian data. Tensors are named as PyTorch's state_dict ("w", "b" for the linear
 * model; "0.weight", "0.bias", ... for Sequential), so torch / safetensors load them as they
 * are. Optimizer state is stored beside them as "optim.<state>.<param>" (e.g.
 * "optim.exp_avg.0.weight"), with "optim.type", "optim.step" and "optim.state" (the state
 * names, comma-separated) in __metadata__, plus "format": "pt" unless the caller sets it.
 */

struct ckpt_kv {
    const char *key, *value;
};

/*
 * Writes m (and o's state when o is not NULL) with the caller's metadata (job id, iteration,
 * epoch, data cursor...; keys starting with "optim." are reserved) to path: a temp file in
 * the same directory, fsynced, renamed over path, and the directory fsynced, so path always
 * holds a whole checkpoint.
 */
int ckpt_save(const char *path, struct nn_model *m, struct optim *o, const struct ckpt_kv *meta,
              int n_meta, struct err *e);

struct ckpt_meta;   /* __metadata__ of a loaded file */

/*
 * Reads path into m (and o when not NULL: its state and step count, which the file must
 * have for the same optimizer type). Everything is validated before anything is changed:
 * header length, JSON, dtypes, shapes, offsets inside the file and not overlapping, every
 * parameter present with m's dtype and shape, no unexpected tensors. A bad file fails with
 * ERR_INVALID_DATA and says what is wrong; an unreadable one with ERR_IO. *meta (when not
 * NULL) receives the metadata, freed with ckpt_meta_free.
 */
int ckpt_load(const char *path, struct nn_model *m, struct optim *o, struct ckpt_meta **meta,
              struct err *e);

/*
 * Loads only m's parameters from a safetensors image in memory, as PyTorch's strict
 * model.load_state_dict(state_dict) does: each parameter must be there with m's shape (F32
 * and F64 both load, converted to m's dtype), and nothing else may be, optimizer state
 * ("optim.*") aside, which is ignored. Messages name the key, and for a size mismatch both
 * shapes; name (a path or URL) says which file. m is unchanged on failure.
 */
int ckpt_load_params_mem(const void *buf, size_t len, const char *name, struct nn_model *m,
                         struct err *e);

/*
 * Reads only path's header, validated as ckpt_load validates it (the data is not read), and
 * gives its metadata in *meta (freed with ckpt_meta_free): to learn a model's shape before
 * building it.
 */
int ckpt_meta_read(const char *path, struct ckpt_meta **meta, struct err *e);

/* The value of key, or NULL. */
const char *ckpt_meta_get(const struct ckpt_meta *md, const char *key);
int ckpt_meta_count(const struct ckpt_meta *md);
const char *ckpt_meta_key(const struct ckpt_meta *md, int i);
const char *ckpt_meta_value(const struct ckpt_meta *md, int i);
void ckpt_meta_free(struct ckpt_meta *md);

#endif
