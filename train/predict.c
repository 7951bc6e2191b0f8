/* predict.c — rebuilds a job's model from its final checkpoint and runs the forward pass without a tape. */
#include "predict.h"

#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "nn.h"
#include "snapshot.h"
#include "spec_compile.h"
#include "tensor.h"

/* The width of a layers stack's last linear layer: what the stack outputs. */
static int64_t layers_outputs(const struct job_spec *spec)
{
    for (int i = spec->net.n_layers; i-- > 0;)
        if (spec->net.layers[i].kind == NN_LAYER_LINEAR)
            return spec->net.layers[i].out_features;
    return 0;
}

int predict_shape(const struct job_spec *spec, const char *ckpt_path, int64_t *features, int64_t *outputs,
                  struct err *e)
{
    struct snapshot_meta meta;
    if (snapshot_peek(ckpt_path, &meta, e))
        return e->code;
    /* A layers stack says its own width (checkpoints of older builds wrote 0 for it). */
    if (spec->model == SPEC_MODEL_LAYERS)
        meta.outputs = layers_outputs(spec);
    if (meta.features <= 0 || meta.outputs <= 0)
        return err_set(e, ERR_INVALID_DATA, "checkpoint %s does not say the model's shape", ckpt_path);
    *features = meta.features;
    *outputs = meta.outputs;
    return 0;
}

/* x as a tensor of the model's dtype: borrowed for float64, a float32 copy otherwise. */
static struct tensor *input(enum tensor_dtype dt, const double *x, int64_t n, int64_t features,
                            struct err *e)
{
    int64_t shape[2] = {n, features};
    if (dt == TENSOR_F64)
        return tensor_wrap(be_cpu(), (void *)x, dt, 2, shape, NULL, e);
    struct tensor *t = tensor_new(be_cpu(), dt, 2, shape, e);
    if (t && tensor_copy_from_host_f64(t, x, e)) {
        tensor_free(t);
        return NULL;
    }
    return t;
}

int predict_rows(const struct job_spec *spec, const char *ckpt_path, const double *x, int64_t n,
                 int64_t features, double *out, struct err *e)
{
    int64_t want, outputs;
    if (predict_shape(spec, ckpt_path, &want, &outputs, e))
        return e->code;
    if (features != want)
        return err_set(e, ERR_INVALID_ARG, "rows must have %lld values (the model's features), got %lld",
                       (long long)want, (long long)features);
    enum tensor_dtype dt = spec->dtype;
    struct nn_model *m = NULL;
    struct tensor *xt = NULL, *y = NULL;
    int rc = 0;
    if (spec_model_new(spec, be_cpu(), dt, features, outputs, &m, e) ||
        snapshot_load(ckpt_path, m, NULL, NULL, e) || !(xt = input(dt, x, n, features, e)) ||
        !(y = nn_forward(m, NULL, xt, e)))
        rc = e->code ? e->code : err_set(e, ERR_INTERNAL, "prediction failed");
    else if (tensor_numel(y) != n * outputs)
        rc = err_set(e, ERR_INTERNAL, "the model gave %lld values for %lld rows of %lld outputs",
                     (long long)tensor_numel(y), (long long)n, (long long)outputs);
    else
        rc = tensor_copy_to_host_f64(y, out, e);
    tensor_free(y);
    tensor_free(xt);
    nn_model_free(m);
    return rc;
}
