/* optim.h — optimizers with PyTorch's update rules, and clip_grad_norm_. */
#ifndef TRAIND_CORE_OPTIM_H
#define TRAIND_CORE_OPTIM_H

#include <stdbool.h>

#include "nn.h"

enum optim_kind { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW };

struct optim_config {
    enum optim_kind kind;
    double lr;
    double momentum;       /* SGD */
    double weight_decay;   /* SGD, Adam: added to the gradient; AdamW: decoupled */
    bool nesterov;         /* SGD; needs momentum > 0 */
    double beta1, beta2;   /* Adam, AdamW */
    double eps;            /* Adam, AdamW */
};

#define OPTIM_NUM_KINDS 3

/*
 * torch.optim's defaults per kind, the one place they are written: SGD lr 0.03 (the
 * DC-taxi baseline's; torch has none); Adam lr 1e-3, betas (0.9, 0.999), eps 1e-8; AdamW
 * the same with weight_decay 1e-2. The job spec fills and documents its optimizer fields
 * from this table, so it lives in the header as data.
 */
static const struct optim_config optim_defaults[OPTIM_NUM_KINDS] = {
    [OPTIM_SGD] = {.kind = OPTIM_SGD, .lr = 0.03},
    [OPTIM_ADAM] = {.kind = OPTIM_ADAM, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8},
    [OPTIM_ADAMW] = {.kind = OPTIM_ADAMW, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                     .weight_decay = 1e-2},
};

/* *cfg = optim_defaults[kind]. */
void optim_config_defaults(struct optim_config *cfg, enum optim_kind kind);

struct optim;

int optim_create(const struct optim_config *cfg, struct nn_model *m, struct optim **out,
                 struct err *e);
void optim_free(struct optim *o);

/* One update of every parameter from its gradient (torch.optim.SGD/Adam/AdamW.step,
 * single-tensor code path, amsgrad off). */
int optim_step(struct optim *o, struct err *e);

/* Steps taken so far (the "step" of PyTorch's optimizer state). */
int64_t optim_steps(const struct optim *o);

/*
 * torch.nn.utils.clip_grad_norm_: total L2 norm over every gradient, and if
 * max_norm > 0 scales the gradients by min(1, max_norm / (norm + 1e-6)).
 * *total_norm gets the norm before clipping.
 */
int optim_clip_grad_norm(struct nn_model *m, double max_norm, double *total_norm, struct err *e);

/*
 * optim_clip_grad_norm(m, max_norm) then optim_step, with the same parameters and state
 * to the bit, in two passes over the gradients instead of three and with nothing read
 * back: the sum of squares stays in the backend's memory and the update kernel applies
 * the clip coefficient itself (be_clip). On a GPU the step is queued without waiting.
 * The gradients are left unscaled (the caller zeroes them next). max_norm 0: no clipping.
 */
int optim_step_clipped(struct optim *o, double max_norm, struct err *e);

/* The gradient norm (before clipping) of the last optim_step_clipped; waits for it. */
int optim_last_grad_norm(const struct optim *o, double *norm, struct err *e);

/* ---- state, for checkpoints ---- */

/* "sgd", "adam", "adamw". */
const char *optim_kind_name(enum optim_kind kind);
enum optim_kind optim_kind_of(const struct optim *o);

/* The optimizer's state buffers, each flat and laid out like nn_params_flat, named as in
 * PyTorch's optimizer state: SGD with momentum has "momentum_buffer"; Adam and AdamW have
 * "exp_avg" and "exp_avg_sq"; plain SGD none. */
int optim_num_states(const struct optim *o);
struct tensor *optim_state(struct optim *o, int i, const char **name);

/* Sets the step count (after loading state from a checkpoint). */
int optim_set_steps(struct optim *o, int64_t steps, struct err *e);

#endif
