/* nn.h — models (parameters in one flat buffer, gradients in another), inits and losses. */
#ifndef TRAIND_CORE_NN_H
#define TRAIND_CORE_NN_H

#include "autograd.h"
#include "rng.h"
#include "tensor.h"

struct nn_model;

/*
 * The DC-taxi baseline as PyTorch's example trains it: w (n_features, 1)
 * and b (1, 1); forward is squeeze(X @ w + b), so X (N, F) gives (N).
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

/* ---- Sequential models (MLPs) ---- */

enum nn_layer_kind {
    NN_LAYER_LINEAR,    /* nn.Linear(in, out_features): weight (out, in), bias (out) */
    NN_LAYER_RELU,
    NN_LAYER_SIGMOID,
    NN_LAYER_TANH,
    NN_LAYER_SOFTMAX,   /* nn.Softmax(dim=1) */
};

struct nn_layer_spec {
    enum nn_layer_kind kind;
    int64_t out_features;   /* NN_LAYER_LINEAR only */
};

#define NN_MAX_LAYERS 32

/* "linear", "relu", "sigmoid", "tanh", "softmax" -> kind; 0 or ERR_INVALID_ARG. */
int nn_layer_kind_parse(const char *name, enum nn_layer_kind *out);
const char *nn_layer_kind_name(enum nn_layer_kind kind);

/*
 * nn.Sequential of layers on inputs (N, n_in). Parameters are named as its state_dict
 * ("0.weight", "0.bias", "2.weight", ...: the layer's index, then weight or bias), live in
 * one flat buffer in that order (gradients in another) and start at zero: call nn_init.
 * Forward gives (N, out) of the last layer that has outputs.
 */
int nn_sequential(const struct backend *be, enum tensor_dtype dt, int64_t n_in,
                  const struct nn_layer_spec *layers, int n_layers, struct nn_model **out,
                  struct err *e);

/* {"type":"mlp","hidden":[h0,h1,...],"activation":act}: Linear(n_in,h0), act, Linear(h0,h1),
 * act, ..., Linear(h_last, n_out). */
int nn_mlp(const struct backend *be, enum tensor_dtype dt, int64_t n_in, const int64_t *hidden,
           int n_hidden, enum nn_layer_kind activation, int64_t n_out, struct nn_model **out,
           struct err *e);

int64_t nn_num_inputs(const struct nn_model *m);    /* features a row of x has */
int64_t nn_num_outputs(const struct nn_model *m);   /* 1 for the linear model (forward gives (N)) */

enum nn_init_kind {
    /* What the PyTorch module does on construction: nn.Linear's reset_parameters
     * (kaiming_uniform_(a=sqrt(5)) on the weight, bias U(+-1/sqrt(fan_in))) for Sequential;
     * for the linear model (plain tensors in PyTorch's DC-taxi example), kaiming_uniform. */
    NN_INIT_DEFAULT,
    /* The DC-taxi example's kaiming_uniform_ with defaults (a=0), fan_in = size(1), on
     * every weight; Sequential biases as nn.Linear does. */
    NN_INIT_KAIMING_UNIFORM,
};

/* Initialises every parameter, drawing from r in PyTorch's order (layers in order, weight
 * then bias), so after rng_seed(r, s) it equals torch.manual_seed(s) + construction. */
int nn_init(struct nn_model *m, enum nn_init_kind kind, struct rng *r, struct err *e);

/* ---- losses (nn_loss.c) ---- */

enum nn_loss_kind { NN_LOSS_MSE, NN_LOSS_CROSS_ENTROPY, NN_LOSS_BCE_WITH_LOGITS };

/* "mse", "cross_entropy", "bce" (or "bce_with_logits") -> kind; 0 or ERR_INVALID_ARG. */
int nn_loss_parse(const char *name, enum nn_loss_kind *out);

/* F.cross_entropy(logits (N, C), labels (N) class indices as floats), mean. */
struct tensor *nn_cross_entropy_loss(struct ag_tape *tp, struct tensor *logits,
                                     struct tensor *labels, struct err *e);
/* F.binary_cross_entropy_with_logits, mean; targets in [0, 1]. */
struct tensor *nn_bce_with_logits_loss(struct ag_tape *tp, struct tensor *logits,
                                       struct tensor *target, struct err *e);

/*
 * The loss of kind between a model's output and the batch's label column. A prediction of
 * shape (N, 1) against a target (N) is squeezed first (as .squeeze(1) in PyTorch).
 */
struct tensor *nn_loss(struct ag_tape *tp, enum nn_loss_kind kind, struct tensor *pred,
                       struct tensor *target, struct err *e);

/*
 * nn_loss(kind, nn_forward(m, x), target) as one call, so the model may fuse: the linear
 * model with MSE runs op_linear_mse (one pass over the batch) when the backend has it.
 * Same value and gradients as the two calls; this is what a training step should call.
 */
struct tensor *nn_forward_loss(struct nn_model *m, struct ag_tape *tp, enum nn_loss_kind kind,
                               struct tensor *x, struct tensor *target, struct err *e);

int nn_num_params(const struct nn_model *m);
struct tensor *nn_param(struct nn_model *m, int i);     /* its ->grad is set */
const char *nn_param_name(const struct nn_model *m, int i); /* PyTorch names: "w", "b", "0.weight" */
struct tensor *nn_params_flat(struct nn_model *m);      /* 1-D view of every parameter */
struct tensor *nn_grads_flat(struct nn_model *m);       /* 1-D view of every gradient */
void nn_zero_grad(struct nn_model *m);
/* Every gradient times alpha, in place (a replica's share of a batch weighted to the whole). */
int nn_grads_scale(struct nn_model *m, double alpha, struct err *e);
/* nn_grads_scale of the flat gradient's elements [lo, lo + n) alone, to the same bits. */
int nn_grads_scale_part(struct nn_model *m, size_t lo, size_t n, double alpha, struct err *e);
enum tensor_dtype nn_dtype(const struct nn_model *m);

/*
 * ag_backward of loss that tells ready(ctx, from) each time the flat gradient's elements
 * [from, end) are all complete (from only falls), so they may be shipped while backward
 * computes the rest: parameters come in layer order, backward walks the layers in reverse,
 * so the tail is complete first. The last call, once backward is done, has from 0.
 */
typedef void (*nn_grads_ready_fn)(void *ctx, size_t from);
int nn_backward_ready(struct nn_model *m, struct ag_tape *tp, struct tensor *loss, nn_grads_ready_fn ready,
                      void *ctx, struct err *e);

#endif
