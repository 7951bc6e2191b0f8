/* nn.h — models (parameters in one flat buffer, gradients in another), inits and losses. */
#ifndef TRAIND_CORE_NN_H
#define TRAIND_CORE_NN_H

#include "autograd.h"
#include "rng.h"
#include "tensor.h"

struct nn_model;

/*
 * The DC-taxi baseline of the reference workflow: w (n_features, 1) and
 * b (1, 1); forward is squeeze(X @ w + b), so X (N, F) gives (N).
 * Parameters and gradients live in one flat buffer each (llm.c style), so
 * zeroing, the global norm, the update and checkpointing are one pass each.
 */
int nn_linear_regression(const struct backend *be, enum tensor_dtype dt, int64_t n_features,
                         struct nn_model **out, struct err *e);
void nn_model_free(struct nn_model *m);

/* PyTorch's kaiming_uniform_ defaults (a=0, fan_in, leaky_relu gain): bound
 * sqrt(6 / fan_in) with fan_in = size(1) of each parameter, drawn from r in
 * parameter order. With rng_seed(r, s) this is torch.manual_seed(s) followed by
 * kaiming_uniform_ on each parameter, bit for bit. */
int nn_init_kaiming_uniform(struct nn_model *m, struct rng *r, struct err *e);

struct tensor *nn_forward(struct nn_model *m, struct ag_tape *tp, struct tensor *x, struct err *e);

/* mean((pred - target)^2), PyTorch's mse_loss with reduction='mean'. */
struct tensor *nn_mse_loss(struct ag_tape *tp, struct tensor *pred, struct tensor *target,
                           struct err *e);

int nn_num_params(const struct nn_model *m);
struct tensor *nn_param(struct nn_model *m, int i);     /* its ->grad is set */
const char *nn_param_name(const struct nn_model *m, int i); /* PyTorch names: "w", "b", "0.weight" */
struct tensor *nn_params_flat(struct nn_model *m);      /* 1-D view of every parameter */
struct tensor *nn_grads_flat(struct nn_model *m);       /* 1-D view of every gradient */
void nn_zero_grad(struct nn_model *m);
enum tensor_dtype nn_dtype(const struct nn_model *m);

#endif
