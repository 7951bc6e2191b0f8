/* checkpoint_impl.h — core-internal: the tensors a checkpoint of a model (+ optimizer) holds. */
#ifndef TRAIND_CORE_CHECKPOINT_IMPL_H
#define TRAIND_CORE_CHECKPOINT_IMPL_H

#include "checkpoint.h"
#include "tensor.h"

#define CKPT_MAX_HEADER (100u << 20)   /* about the safetensors library's own limit */
#define CKPT_NAME 96

/* One tensor of the file and the memory it comes from or goes to. */
struct ckpt_entry {
    char name[CKPT_NAME];
    struct tensor view;     /* a header over a parameter's or a state buffer's memory */
};

/* Parameters in model order, then each optimizer state of every parameter (o may be NULL).
 * *out is freed with free(). */
int ckpt_entries(struct nn_model *m, struct optim *o, struct ckpt_entry **out, int *n, struct err *e);
size_t ckpt_entry_bytes(const struct ckpt_entry *en);

#endif
