/* spec_compile.c — the job spec into core's and storage's settings (spec_compile.h), in one place. */
#include "spec_compile.h"

static const enum dataset_header headers[] = {
    [SPEC_HEADER_AUTO] = DATASET_HEADER_AUTO,
    [SPEC_HEADER_YES] = DATASET_HEADER_YES,
    [SPEC_HEADER_NO] = DATASET_HEADER_NO,
};

static const enum dataset_format formats[] = {
    [SPEC_FORMAT_AUTO] = DATASET_FORMAT_AUTO,
    [SPEC_FORMAT_CSV] = DATASET_FORMAT_CSV,
    [SPEC_FORMAT_PARQUET] = DATASET_FORMAT_PARQUET,
};

void spec_compile(const struct job_spec *s, struct spec_compiled *out)
{
    *out = (struct spec_compiled){
        .dtype = s->dtype,
        .loss = s->loss,
        .init = s->init,
        .optim = s->optimizer,
        .dataset = {
            .url = s->data.train,
            .shards_url = s->data.shards,
            .format = formats[s->data.format],
            .header = headers[s->data.header],
            .label_column = s->data.label,
            .label_name = s->data.label_name,
            .features = s->data.features,
            .n_features = s->data.n_features,
            .dtype = s->dtype == TENSOR_F32 ? STORE_F32 : STORE_F64,
            .batch_size = (size_t)s->batch_size,
            .drop_last = s->data.drop_last,
            .seed = s->seed,
            .shuffle_partitions = s->data.shuffle_partitions,
            .shuffle_buffer = (size_t)s->data.shuffle_buffer,
        },
        .remote = {
            .s3_endpoint = s->data.endpoint,
            .s3_region = s->data.region,
            .s3_anonymous = s->data.anonymous,
        },
        .outputs_from_labels = s->model == SPEC_MODEL_MLP && !s->net.outputs && s->loss == NN_LOSS_CROSS_ENTROPY,
    };
}

int spec_model_new(const struct job_spec *s, const struct backend *be, enum tensor_dtype dt, int64_t n_in,
                   int64_t n_out, struct nn_model **out, struct err *e)
{
    if (s->model == SPEC_MODEL_LINEAR)
        return nn_linear_regression(be, dt, n_in, out, e);
    if (s->model == SPEC_MODEL_MLP)
        return nn_mlp(be, dt, n_in, s->net.hidden, s->net.n_hidden, s->net.activation, n_out, out, e);
    return nn_sequential(be, dt, n_in, s->net.layers, s->net.n_layers, out, e);
}

/* a * b + c without passing UINT64_MAX. */
static uint64_t mul_add(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t ab;
    if (__builtin_mul_overflow(a, b, &ab) || ab > UINT64_MAX - c)
        return UINT64_MAX;
    return ab + c;
}

uint64_t spec_model_bytes(const struct job_spec *s, int64_t n_in, int64_t n_out)
{
    if (n_out <= 0)
        n_out = s->model == SPEC_MODEL_MLP && s->net.outputs > 0 ? s->net.outputs : 1;
    /* The widths from input to output; each Linear(a, b) holds a * b weights and b biases. */
    int64_t width[SPEC_MAX_LAYERS + 2];
    int n = 0;
    width[n++] = n_in;
    if (s->model == SPEC_MODEL_MLP) {
        for (int i = 0; i < s->net.n_hidden; i++)
            width[n++] = s->net.hidden[i];
        width[n++] = n_out;
    } else if (s->model == SPEC_MODEL_LAYERS) {
        for (int i = 0; i < s->net.n_layers; i++)
            if (s->net.layers[i].kind == NN_LAYER_LINEAR)
                width[n++] = s->net.layers[i].out_features;
    } else {
        width[n++] = 1;   /* linear regression: w (n_in x 1) and b (1 x 1) */
    }
    uint64_t params = 0;
    for (int i = 1; i < n; i++)
        params = mul_add((uint64_t)width[i], (uint64_t)width[i - 1] + 1, params);
    return mul_add(params, tensor_dtype_size(s->dtype), 0);
}
