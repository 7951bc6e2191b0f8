/* predict.c — rebuilds a job's model from its stored parameters and runs the forward pass without a tape. */
#include "predict.h"

#include <string.h>

#include "backend.h"
#include "nn.h"
#include "tensor.h"

static const struct job_param *param_named(const struct job_params *ps, const char *name)
{
    for (int i = 0; i < ps->n; i++)
        if (strcmp(ps->p[i].name, name) == 0)
            return &ps->p[i];
    return NULL;
}

int64_t predict_num_features(const struct job_params *ps)
{
    const struct job_param *w = ps ? param_named(ps, "w") : NULL;
    return w && w->cols == 1 ? w->rows : -1;
}

/* Copies each stored parameter into the model's parameter of the same name and shape. */
static int load_params(struct nn_model *m, const struct job_params *ps, struct err *e)
{
    for (int i = 0; i < nn_num_params(m); i++) {
        struct tensor *t = nn_param(m, i);
        const struct job_param *p = param_named(ps, nn_param_name(m, i));
        int64_t n = p ? p->rows * (p->cols ? p->cols : 1) : -1;
        if (!p || n != tensor_numel(t))
            return err_set(e, ERR_INTERNAL, "stored parameter %s does not fit the model",
                           nn_param_name(m, i));
        if (tensor_copy_from_host_f64(t, p->values, e))
            return e->code;
    }
    return 0;
}

int predict_rows(const struct job_params *ps, const double *x, int64_t n, int64_t features,
                 double *out, struct err *e)
{
    int64_t want = predict_num_features(ps);
    if (want < 0)
        return err_set(e, ERR_INTERNAL, "this model cannot be rebuilt for prediction");
    if (features != want)
        return err_set(e, ERR_INVALID_ARG, "rows must have %lld values (the model's features), got %lld",
                       (long long)want, (long long)features);
    struct nn_model *m = NULL;
    struct tensor *xt = NULL, *y = NULL;
    int64_t shape[2] = {n, features};
    int rc = 0;
    if (nn_linear_regression(be_cpu(), TENSOR_F64, features, &m, e) || load_params(m, ps, e) ||
        !(xt = tensor_wrap(be_cpu(), (void *)x, TENSOR_F64, 2, shape, NULL, e)) ||
        !(y = nn_forward(m, NULL, xt, e)) || tensor_copy_to_host_f64(y, out, e))
        rc = e->code ? e->code : err_set(e, ERR_INTERNAL, "prediction failed");
    tensor_free(y);
    tensor_free(xt);
    nn_model_free(m);
    return rc;
}
