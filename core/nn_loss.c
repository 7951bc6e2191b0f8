/* nn_loss.c — the losses a job spec names (mse, cross_entropy, bce) and their dispatcher. */
#include <string.h>

#include "nn.h"
#include "ops.h"

int nn_loss_parse(const char *name, enum nn_loss_kind *out)
{
    static const struct {
        const char *name;
        enum nn_loss_kind kind;
    } names[] = {
        {"mse", NN_LOSS_MSE},
        {"cross_entropy", NN_LOSS_CROSS_ENTROPY},
        {"bce", NN_LOSS_BCE_WITH_LOGITS},
        {"bce_with_logits", NN_LOSS_BCE_WITH_LOGITS},
    };
    for (size_t i = 0; name && i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].kind;
            return 0;
        }
    return ERR_INVALID_ARG;
}

struct tensor *nn_cross_entropy_loss(struct ag_tape *tp, struct tensor *logits,
                                     struct tensor *labels, struct err *e)
{
    return op_cross_entropy(tp, logits, labels, e);
}

struct tensor *nn_bce_with_logits_loss(struct ag_tape *tp, struct tensor *logits,
                                       struct tensor *target, struct err *e)
{
    return op_bce_with_logits(tp, logits, target, e);
}

struct tensor *nn_loss(struct ag_tape *tp, enum nn_loss_kind kind, struct tensor *pred,
                       struct tensor *target, struct err *e)
{
    if (!pred || !target) {
        err_set(e, ERR_INVALID_ARG, "nn_loss: NULL argument");
        return NULL;
    }
    if (kind == NN_LOSS_CROSS_ENTROPY)
        return op_cross_entropy(tp, pred, target, e);
    /* (N, 1) against (N): the model's single output column, squeezed as .squeeze(1) */
    struct tensor *p = pred, *sq = NULL, *out;
    if (pred->ndim == 2 && pred->shape[1] == 1 && target->ndim == 1) {
        if (!(p = sq = op_squeeze(tp, pred, e)))
            return NULL;
        if (pred->shape[0] == 1) {   /* squeeze dropped both dims: keep (1,) */
            p->ndim = 1;
            p->shape[0] = 1;
        }
    }
    if (kind == NN_LOSS_MSE)
        out = nn_mse_loss(tp, p, target, e);
    else if (kind == NN_LOSS_BCE_WITH_LOGITS)
        out = op_bce_with_logits(tp, p, target, e);
    else {
        err_set(e, ERR_INVALID_ARG, "nn_loss: unknown loss %d", (int)kind);
        out = NULL;
    }
    if (!tp)
        tensor_free(sq);
    return out;
}
