/* optim.h — optimizers with PyTorch's update rules, and clip_grad_norm_. */
#ifndef TRAIND_CORE_OPTIM_H
#define TRAIND_CORE_OPTIM_H

#include <stdbool.h>

#include "nn.h"

enum optim_kind { OPTIM_SGD };

struct optim_config {
    enum optim_kind kind;
    double lr;
    double momentum;       /* SGD */
    double weight_decay;
    bool nesterov;         /* SGD; needs momentum > 0 */
};

struct optim;

int optim_create(const struct optim_config *cfg, struct nn_model *m, struct optim **out,
                 struct err *e);
void optim_free(struct optim *o);

/* One update of every parameter from its gradient (torch.optim.SGD.step). */
int optim_step(struct optim *o, struct err *e);

/*
 * torch.nn.utils.clip_grad_norm_: total L2 norm over every gradient, and if
 * max_norm > 0 scales the gradients by min(1, max_norm / (norm + 1e-6)).
 * *total_norm gets the norm before clipping.
 */
int optim_clip_grad_norm(struct nn_model *m, double max_norm, double *total_norm, struct err *e);

#endif
