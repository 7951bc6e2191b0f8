/* optim.c — torch.optim.SGD and clip_grad_norm_ over the model's flat buffers, one pass each. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>

#include "backend.h"
#include "be_cpu.h"

struct optim {
    struct optim_config cfg;
    struct nn_model *m;
    struct tensor *momentum_buf;   /* flat, like the parameters; NULL without momentum */
    int64_t steps;
};

int optim_create(const struct optim_config *cfg, struct nn_model *m, struct optim **out,
                 struct err *e)
{
    *out = NULL;
    if (!cfg || !m)
        return err_set(e, ERR_INVALID_ARG, "optim_create: NULL argument");
    if (cfg->kind != OPTIM_SGD)
        return err_set(e, ERR_INVALID_ARG, "optim_create: unknown optimizer %d", (int)cfg->kind);
    if (!(cfg->lr >= 0) || !(cfg->momentum >= 0) || !(cfg->weight_decay >= 0))
        return err_set(e, ERR_INVALID_ARG,
                       "optim_create: lr %g, momentum %g, weight_decay %g must be >= 0", cfg->lr,
                       cfg->momentum, cfg->weight_decay);
    if (cfg->nesterov && cfg->momentum <= 0)
        return err_set(e, ERR_INVALID_ARG, "optim_create: nesterov needs momentum > 0");
    struct optim *o = calloc(1, sizeof *o);
    if (!o)
        return err_set(e, ERR_NOMEM, "optim_create: out of host memory");
    o->cfg = *cfg;
    o->m = m;
    if (cfg->momentum != 0) {
        struct tensor *p = nn_params_flat(m);
        o->momentum_buf = tensor_new(p->be, p->dtype, 1, p->shape, e);
        if (!o->momentum_buf) {
            free(o);
            return err_prefix(e, "optim_create");
        }
    }
    *out = o;
    return 0;
}

void optim_free(struct optim *o)
{
    if (!o)
        return;
    tensor_free(o->momentum_buf);
    free(o);
}

int optim_step(struct optim *o, struct err *e)
{
    if (!o)
        return err_set(e, ERR_INVALID_ARG, "optim_step: NULL optimizer");
    struct tensor *p = nn_params_flat(o->m), *g = nn_grads_flat(o->m);
    struct be_sgd_args a = {
        .lr = o->cfg.lr,
        .momentum = o->cfg.momentum,
        .weight_decay = o->cfg.weight_decay,
        .nesterov = o->cfg.nesterov,
        .first = o->steps == 0,
    };
    int rc = p->be->k->sgd(p->be, p, g, o->momentum_buf, &a, e);
    if (!rc)
        o->steps++;
    return rc;
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
    double norm = sqrt(ss);
    if (total_norm)
        *total_norm = norm;
    if (max_norm > 0) {
        double coef = max_norm / (norm + 1e-6);
        /* torch multiplies by the clamped coefficient (NaN stays NaN); by 1.0 it changes
         * nothing, so that pass is skipped. */
        if (!(coef >= 1.0))
            rc = g->be->k->scale(g->be, g, coef, e);
    }
    return rc;
}
