/* optim.c — torch.optim SGD/Adam/AdamW and clip_grad_norm_ over the flat buffers, one pass each. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>

#include "backend.h"

struct optim {
    struct optim_config cfg;
    struct nn_model *m;
    struct tensor *momentum_buf;   /* SGD: flat, like the parameters; NULL without momentum */
    struct tensor *exp_avg, *exp_avg_sq;   /* Adam(W) moments, flat */
    struct tensor *sumsq;   /* f64 (1) beside the parameters: optim_step_clipped's sum of g^2 */
    int64_t steps;
};

void optim_config_defaults(struct optim_config *cfg, enum optim_kind kind)
{
    *cfg = optim_defaults[kind];
}

static struct tensor *zeros_like_flat(struct nn_model *m, struct err *e)
{
    struct tensor *p = nn_params_flat(m);
    return tensor_new(p->be, p->dtype, 1, p->shape, e);
}

static int check_config(const struct optim_config *cfg, struct err *e)
{
    if (cfg->kind != OPTIM_SGD && cfg->kind != OPTIM_ADAM && cfg->kind != OPTIM_ADAMW)
        return err_set(e, ERR_INVALID_ARG, "optim_create: unknown optimizer %d", (int)cfg->kind);
    if (!(cfg->lr >= 0) || !(cfg->weight_decay >= 0))
        return err_set(e, ERR_INVALID_ARG, "optim_create: lr %g and weight_decay %g must be >= 0",
                       cfg->lr, cfg->weight_decay);
    if (cfg->kind == OPTIM_SGD) {
        if (!(cfg->momentum >= 0))
            return err_set(e, ERR_INVALID_ARG, "optim_create: momentum %g must be >= 0",
                           cfg->momentum);
        if (cfg->nesterov && cfg->momentum <= 0)
            return err_set(e, ERR_INVALID_ARG, "optim_create: nesterov needs momentum > 0");
        return 0;
    }
    if (!(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1))
        return err_set(e, ERR_INVALID_ARG, "optim_create: betas (%g, %g) must lie in [0, 1)",
                       cfg->beta1, cfg->beta2);
    if (!(cfg->eps >= 0))
        return err_set(e, ERR_INVALID_ARG, "optim_create: eps %g must be >= 0", cfg->eps);
    return 0;
}

int optim_create(const struct optim_config *cfg, struct nn_model *m, struct optim **out,
                 struct err *e)
{
    *out = NULL;
    if (!cfg || !m)
        return err_set(e, ERR_INVALID_ARG, "optim_create: NULL argument");
    int rc = check_config(cfg, e);
    if (rc)
        return rc;
    struct optim *o = calloc(1, sizeof *o);
    if (!o)
        return err_set(e, ERR_NOMEM, "optim_create: out of host memory");
    o->cfg = *cfg;
    o->m = m;
    if (cfg->kind == OPTIM_SGD && cfg->momentum != 0)
        rc = !(o->momentum_buf = zeros_like_flat(m, e));
    else if (cfg->kind != OPTIM_SGD)
        rc = !(o->exp_avg = zeros_like_flat(m, e)) || !(o->exp_avg_sq = zeros_like_flat(m, e));
    if (rc) {
        optim_free(o);
        return err_prefix(e, "optim_create");
    }
    *out = o;
    return 0;
}

void optim_free(struct optim *o)
{
    if (!o)
        return;
    tensor_free(o->momentum_buf);
    tensor_free(o->exp_avg);
    tensor_free(o->exp_avg_sq);
    tensor_free(o->sumsq);
    free(o);
}

/* One update of every parameter, each gradient first scaled as clip says (be_clip). */
static int update(struct optim *o, struct be_clip clip, struct err *e)
{
    struct tensor *p = nn_params_flat(o->m), *g = nn_grads_flat(o->m);
    int rc;
    if (o->cfg.kind == OPTIM_SGD) {
        struct be_sgd_args a = {
            .lr = o->cfg.lr,
            .momentum = o->cfg.momentum,
            .weight_decay = o->cfg.weight_decay,
            .nesterov = o->cfg.nesterov,
            .first = o->steps == 0,
            .clip = clip,
        };
        rc = p->be->k->sgd(p->be, p, g, o->momentum_buf, &a, e);
    } else {
        struct be_adam_args a = {
            .lr = o->cfg.lr,
            .beta1 = o->cfg.beta1,
            .beta2 = o->cfg.beta2,
            .eps = o->cfg.eps,
            .weight_decay = o->cfg.weight_decay,
            .decoupled = o->cfg.kind == OPTIM_ADAMW,
            .step = o->steps + 1,
            .clip = clip,
        };
        if (!p->be->k->adam)
            return err_set(e, ERR_INVALID_ARG, "optim_step: no Adam kernel on %s", p->be->name);
        rc = p->be->k->adam(p->be, p, g, o->exp_avg, o->exp_avg_sq, &a, e);
    }
    if (!rc)
        o->steps++;
    return rc;
}

int optim_step(struct optim *o, struct err *e)
{
    if (!o)
        return err_set(e, ERR_INVALID_ARG, "optim_step: NULL optimizer");
    return update(o, (struct be_clip){0}, e);
}

int optim_step_clipped(struct optim *o, double max_norm, struct err *e)
{
    if (!o)
        return err_set(e, ERR_INVALID_ARG, "optim_step_clipped: NULL optimizer");
    struct tensor *g = nn_grads_flat(o->m);
    const struct be_kernels *k = g->be->k;
    if (!k->sumsq_dev || (k->supports && !k->supports(g->be, BE_OP_SUMSQ, g->dtype)))
        return err_set(e, ERR_INVALID_ARG, "optim_step_clipped: no sumsq_dev kernel on %s",
                       g->be->name);
    const int64_t one = 1;
    if (!o->sumsq && !(o->sumsq = tensor_new(g->be, TENSOR_F64, 1, &one, e)))
        return err_prefix(e, "optim_step_clipped");
    double *ss = (double *)o->sumsq->data;
    int rc = k->sumsq_dev(g->be, g, ss, e);
    if (rc)
        return rc;
    return update(o, (struct be_clip){max_norm > 0 ? ss : NULL, max_norm}, e);
}

int optim_last_grad_norm(const struct optim *o, double *norm, struct err *e)
{
    if (!o || !o->sumsq)
        return err_set(e, ERR_INVALID_ARG, "optim_last_grad_norm: no optim_step_clipped yet");
    double ss;
    int rc = tensor_item(o->sumsq, &ss, e);
    if (!rc)
        *norm = sqrt(ss);
    return rc;
}

int64_t optim_steps(const struct optim *o)
{
    return o ? o->steps : 0;
}

int optim_clip_grad_norm(struct nn_model *m, double max_norm, double *total_norm, struct err *e)
{
    if (!m)
        return err_set(e, ERR_INVALID_ARG, "optim_clip_grad_norm: NULL model");
    struct tensor *g = nn_grads_flat(m);
    double ss;
    int rc = g->be->k->sumsq(g->be, g, &ss, e);
    if (rc)
        return rc;
    if (total_norm)
        *total_norm = sqrt(ss);
    bool on;
    double coef = be_clip_coef(ss, max_norm, &on);
    /* torch multiplies by the clamped coefficient (NaN stays NaN); by 1.0 it changes
     * nothing, so that pass is skipped. */
    return on ? g->be->k->scale(g->be, g, coef, e) : 0;
}

const char *optim_kind_name(enum optim_kind kind)
{
    switch (kind) {
    case OPTIM_SGD: return "sgd";
    case OPTIM_ADAM: return "adam";
    case OPTIM_ADAMW: return "adamw";
    }
    return "?";
}

enum optim_kind optim_kind_of(const struct optim *o)
{
    return o->cfg.kind;
}

int optim_num_states(const struct optim *o)
{
    if (!o)
        return 0;
    return o->momentum_buf ? 1 : o->exp_avg ? 2 : 0;
}

struct tensor *optim_state(struct optim *o, int i, const char **name)
{
    struct tensor *t = NULL;
    const char *n = NULL;
    if (o && o->momentum_buf && i == 0)
        t = o->momentum_buf, n = "momentum_buffer";
    else if (o && o->exp_avg && i == 0)
        t = o->exp_avg, n = "exp_avg";
    else if (o && o->exp_avg_sq && i == 1)
        t = o->exp_avg_sq, n = "exp_avg_sq";
    if (name)
        *name = n;
    return t;
}

int optim_set_steps(struct optim *o, int64_t steps, struct err *e)
{
    if (!o || steps < 0)
        return err_set(e, ERR_INVALID_ARG, "optim_set_steps: %lld steps", (long long)steps);
    o->steps = steps;
    return 0;
}
