/* spec_schema.c — the job spec's schema: one row a field, which parsing, defaults, the canonical dump and the docs all read. */
#include "spec_schema.h"

#include <stdio.h>
#include <string.h>

#include "spec_impl.h"

#define AT(member) offsetof(struct job_spec, member), sizeof(((struct job_spec *)0)->member)
#define WORDS(w) (w), (int)(sizeof(w) / sizeof((w)[0]))
#define ALL_OPTIMIZERS ((1u << OPTIM_SGD) | (1u << OPTIM_ADAM) | (1u << OPTIM_ADAMW))
#define ADAMS ((1u << OPTIM_ADAM) | (1u << OPTIM_ADAMW))
#define MLP (1u << SPEC_MODEL_MLP)

static const char *const dtypes[] = {[TENSOR_F32] = "float32", [TENSOR_F64] = "float64"};
static const char *const losses[] = {
    [NN_LOSS_MSE] = "mse", [NN_LOSS_CROSS_ENTROPY] = "cross_entropy", [NN_LOSS_BCE_WITH_LOGITS] = "bce",
};
static const char *const optimizers[] = {[OPTIM_SGD] = "sgd", [OPTIM_ADAM] = "adam", [OPTIM_ADAMW] = "adamw"};
static const char *const models[] = {
    [SPEC_MODEL_LINEAR] = "linear", [SPEC_MODEL_MLP] = "mlp", [SPEC_MODEL_LAYERS] = "layers",
};
/* An MLP's activation: the layers that take no width and keep one output per class. */
static const char *const activations[] = {
    [NN_LAYER_RELU] = "relu", [NN_LAYER_SIGMOID] = "sigmoid", [NN_LAYER_TANH] = "tanh",
};
static const char *const inits[] = {[NN_INIT_KAIMING_UNIFORM] = "kaiming_uniform", [NN_INIT_DEFAULT] = "default"};
static const char *const formats[] = {
    [SPEC_FORMAT_AUTO] = "auto", [SPEC_FORMAT_CSV] = "csv", [SPEC_FORMAT_PARQUET] = "parquet",
};

const struct spec_field spec_fields[] = {
    {"name", SPEC_T_STRING, SPEC_F_NULL, AT(name), .help = "a name to show"},
    {"client_id", SPEC_T_STRING, SPEC_F_NULL, AT(client_id),
     .help = "idempotency key: the same spec sent again returns the first job; another spec, 409"},
    {"priority", SPEC_T_INT, 0, AT(priority), .ilo = SPEC_PRIORITY_MIN, .ihi = SPEC_PRIORITY_MAX,
     .help = "higher runs first among queued jobs, then oldest first"},
    {"data", SPEC_T_OBJECT, SPEC_F_REQUIRED, .help = "the training data and how to read it"},
    {"data.train", SPEC_T_STRING, SPEC_F_REQUIRED | SPEC_F_URL, AT(data.train),
     .help = "where the CSV or Parquet partitions are, with a glob (`*`, `?`, `[...]`) on the last component, "
             "taken in name order: a path or `file://` URL under a `--data-root`, "
             "`s3://bucket/prefix/part*.csv`, `http(s)://host/part-00000.csv` (one object) or "
             "`http(s)://host/dev/parts.list` (one object URL a line, `#` comments). Partitions "
             "without data rows are skipped; all of them empty is `invalid_data`"},
    {"data.test", SPEC_T_STRING, SPEC_F_NULL | SPEC_F_URL, AT(data.test),
     .help = "a test set, written as `data.train` is and read with its settings: the model is "
             "evaluated on all of it without gradients, and the mean loss over its rows goes into "
             "that iteration's `eval_loss`; its feature columns must match the training set's"},
    {"data.shards", SPEC_T_STRING, SPEC_F_NULL | SPEC_F_URL, AT(data.shards),
     .help = "kaen's `.meta/shards/*.csv` (`id,count`), so rows are counted without reading"},
    {"data.format", SPEC_T_ENUM, 0, AT(data.format), .def = SPEC_FORMAT_AUTO, .words = WORDS(formats),
     .help = "the partitions' format; `auto`: Parquet when every partition's name ends in `.parquet`, else CSV. "
             "Parquet leaves out names starting with `_` or `.`, so a Spark output folder (`dir/`) reads as its "
             "part files. "
             "Parquet columns are read in schema order (BOOLEAN, INT32, INT64, FLOAT, DOUBLE; DECIMAL, DATE as days, "
             "TIMESTAMP as seconds since the epoch; PLAIN, dictionary, "
             "BYTE_STREAM_SPLIT, DELTA_BINARY_PACKED; snappy, gzip, zstd, lz4_raw); a null in one is "
             "`invalid_data` naming the file, the column and the row group"},
    {"data.header", SPEC_T_FORM, 0, .form = &spec_form_header, .shows = "`\"auto\"`",
     .accepts = "`\"auto\"`, `true`, `false`",
     .help = "whether the first row is a header; `auto`: when any field of it is not a number"},
    {"data.label", SPEC_T_FORM, 0, .form = &spec_form_label, .shows = "`0`",
     .accepts = "integer 0..65535, or a column name",
     .help = "the label's column: its index, or its name in the CSV header or the Parquet schema"},
    {"data.features", SPEC_T_FORM, 0, .form = &spec_form_features, .shows = "`\"rest\"`",
     .accepts = "`\"rest\"`, or a list of column names and indices",
     .help = "`rest`: every column but the label, in file order; a list: those columns in its order (names "
             "need a CSV header or Parquet; a column at most once, the label not among them)"},
    {"data.drop_last", SPEC_T_BOOL, 0, AT(data.drop_last),
     .help = "drop an epoch's last, short batch, as DataLoader's `drop_last`"},
    {"data.shuffle", SPEC_T_OBJECT, SPEC_F_NULL, .shows = "`{\"partitions\": false, \"buffer\": 0}`",
     .help = "shuffling; the order depends only on `seed` and the epoch (`null`: none, the same as the default)"},
    {"data.shuffle.partitions", SPEC_T_BOOL, 0, AT(data.shuffle_partitions),
     .help = "a seeded permutation of the partitions each epoch"},
    {"data.shuffle.buffer", SPEC_T_INT, 0, AT(data.shuffle_buffer), .ilo = 0, .ihi = SPEC_MAX_SHUFFLE_BUFFER,
     .help = "rows drawn at random from a buffer this large (Petastorm's shuffling queue); 0: off"},
    {"data.endpoint", SPEC_T_STRING, SPEC_F_NULL | SPEC_F_URL, AT(data.endpoint),
     .help = "an S3-compatible endpoint (`http://127.0.0.1:9000`), addressed path-style; it must be "
             "the daemon's `AWS_ENDPOINT_URL` or one of its `--s3-endpoint` flags, else `400`; "
             "`null`: `AWS_ENDPOINT_URL`, else AWS"},
    {"data.region", SPEC_T_STRING, SPEC_F_NULL, AT(data.region),
     .help = "S3 region for signing; `null`: `AWS_DEFAULT_REGION`, else `us-east-1`"},
    {"data.anonymous", SPEC_T_BOOL, 0, AT(data.anonymous), .help = "unsigned S3 requests, for public buckets"},
    {"model", SPEC_T_OBJECT, 0,
     .help = "the network; parameters are named as PyTorch's `state_dict` (`0.weight`, `0.bias`, …)"},
    {"model.type", SPEC_T_FORM, 0, .words = WORDS(models), .form = &spec_form_model_type,
     .shows = "`\"linear\"`; `\"layers\"` when `layers` is given",
     .help = "`linear`: the DC-taxi baseline's `w` (features×1), `b` (1×1), forward `X @ w + b`; "
             "`mlp`: `nn.Sequential(Linear, act, …, Linear)`; `layers`: the layers as written"},
    {"model.hidden", SPEC_T_FORM, SPEC_F_REQUIRED, .models = MLP, .form = &spec_form_hidden,
     .accepts = "1 to 31 widths 1..65536, like `[256, 256]`", .help = "the hidden layers' widths"},
    {"model.activation", SPEC_T_ENUM, 0, AT(net.activation), .def = NN_LAYER_RELU, .models = MLP,
     .words = WORDS(activations), .help = "after each hidden layer"},
    {"model.outputs", SPEC_T_INT, SPEC_F_DERIVED, AT(net.outputs), .ilo = 1, .ihi = SPEC_MAX_WIDTH,
     .models = MLP, .shows = "from the data",
     .help = "the last layer's width; left out, 1 for `mse` and `bce`, and one per class for "
             "`cross_entropy`: the classes are 0 … the largest label in the first batch"},
    {"model.layers", SPEC_T_FORM, SPEC_F_REQUIRED, .models = 1u << SPEC_MODEL_LAYERS, .form = &spec_form_layers,
     .accepts = "1 to 32 of `{\"linear\": N}`, `{\"relu\": {}}`, `{\"sigmoid\": {}}`, `{\"tanh\": {}}`, "
                "`{\"softmax\": {}}`",
     .help = "`nn.Sequential` as written, like `[{\"linear\":256},{\"relu\":{}},{\"linear\":1}]`; "
             "the last linear layer sets the outputs"},
    {"loss", SPEC_T_ENUM, 0, AT(loss), .def = NN_LOSS_MSE, .words = WORDS(losses), .check = spec_check_loss,
     .help = "`mse` (mean reduction); `cross_entropy` (logits, labels are class indices 0, 1, …; "
             "needs an `mlp` or `layers` model); `bce` (`binary_cross_entropy_with_logits`, labels 0/1)"},
    {"optimizer", SPEC_T_OBJECT, 0, .help = "torch.optim's update rules, and its defaults"},
    {"optimizer.type", SPEC_T_FORM, 0, .words = WORDS(optimizers), .form = &spec_form_optimizer_type, .shows = "`\"sgd\"`",
     .help = "the optimizer; the other fields' defaults follow it"},
    {"optimizer.lr", SPEC_T_REAL, SPEC_F_LO_OPEN, AT(optimizer.lr), .rlo = 0, .rhi = 1e6,
     .optimizers = ALL_OPTIMIZERS, .help = "learning rate (sgd's default is the DC-taxi baseline's; torch has none)"},
    {"optimizer.momentum", SPEC_T_REAL, 0, AT(optimizer.momentum), .rlo = 0, .rhi = 0.999999,
     .optimizers = 1u << OPTIM_SGD, .help = "momentum factor"},
    {"optimizer.nesterov", SPEC_T_BOOL, 0, AT(optimizer.nesterov), .optimizers = 1u << OPTIM_SGD,
     .check = spec_check_nesterov, .help = "Nesterov momentum; needs `momentum` > 0"},
    {"optimizer.betas", SPEC_T_FORM, 0, .optimizers = ADAMS, .form = &spec_form_betas, .shows = "`[0.9, 0.999]`",
     .accepts = "`[b1, b2]`, each in [0, 1)", .help = "the moments' decay rates"},
    {"optimizer.eps", SPEC_T_REAL, SPEC_F_LO_OPEN, AT(optimizer.eps), .rlo = 0, .rhi = 1,
     .optimizers = ADAMS, .help = "added to the denominator"},
    {"optimizer.weight_decay", SPEC_T_REAL, 0, AT(optimizer.weight_decay), .rlo = 0, .rhi = 1e6,
     .optimizers = ALL_OPTIMIZERS, .help = "L2 penalty (sgd, adam), decoupled (adamw)"},
    {"clip_grad_norm", SPEC_T_REAL, SPEC_F_NULL | SPEC_F_LO_OPEN, AT(clip_grad_norm), .rlo = 0, .rhi = 1e12,
     .help = "PyTorch's `clip_grad_norm_` of the total L2 norm; `null`: no clipping"},
    {"batch_size", SPEC_T_INT, 0, AT(batch_size), .ilo = 1, .ihi = SPEC_MAX_BATCH_SIZE, .def = 1048576,
     .help = "rows a step; batches span partitions"},
    {"iterations", SPEC_T_INT, SPEC_F_NULL, AT(iterations), .ilo = 1, .ihi = SPEC_MAX_ITERATIONS, .shows = "—",
     .help = "steps; at the end of the data a short batch is used (unless `data.drop_last`) and the next "
             "epoch starts. Give this or `epochs` (`null` counts as left out)"},
    {"epochs", SPEC_T_INT, SPEC_F_NULL, AT(epochs), .ilo = 1, .ihi = SPEC_MAX_EPOCHS, .shows = "—",
     .check = spec_check_length,
     .help = "passes over the data, as `for epoch in range(E): for batch in DataLoader(...)`: an epoch is "
             "ceil(rows / `batch_size`) iterations, floor with `data.drop_last`. Give this or `iterations`"},
    {"dtype", SPEC_T_ENUM, 0, AT(dtype), .def = TENSOR_F64, .words = WORDS(dtypes),
     .help = "what the data is parsed into and the model computes in"},
    {"device", SPEC_T_FORM, 0, .form = &spec_form_device, .shows = "`\"auto\"`",
     .accepts = "`\"auto\"`, `\"cpu\"`, `\"cuda:N\"` (N 0..63), or a list of `\"cpu\"` and `\"cuda:N\"` "
                "such as `[\"cuda:1\", \"cuda:0\", \"cpu\"]`",
     .help = "where the job trains; see *Devices* below"},
    {"replicas", SPEC_T_INT, 0, AT(replicas), .ilo = 1, .ihi = SPEC_MAX_REPLICAS, .def = 1,
     .check = spec_check_replicas,
     .help = "data-parallel copies of the model, each on a device of its own, all CPU workers or all "
             "GPUs (`\"auto\"`: GPUs where traind has them; or a list of GPUs; not one named `cuda:N`): "
             "every batch is split between them and their gradients summed (NCCL on GPUs), so the "
             "losses are one copy's to rounding"},
    {"replica_bucket_mb", SPEC_T_REAL, 0, AT(replica_bucket_mb), .rlo = 0, .rhi = 1e6, .rdef = 25,
     .help = "as DistributedDataParallel's `bucket_cap_mb`, a replica's gradient is all-reduced in "
             "buckets of this many MiB, each as soon as backward has completed it (the last layers' "
             "first), while backward goes on: on CPU workers by a thread of the replica's, in one "
             "traind or across processes (`mpirun`); on GPUs by NCCL on a second stream. A gradient "
             "no larger is all-reduced whole after backward. 0: always whole. The results are the "
             "same to the bit either way on CPU workers and with 2 GPU replicas; 3 or more GPUs may "
             "round unlike the whole gradient's sum, as NCCL orders each element's sum by where it lies"},
    {"seed", SPEC_T_INT, 0, AT(seed), .ilo = 0, .ihi = INT64_MAX, .help = "seeds initialisation and shuffling"},
    {"checkpoint_every", SPEC_T_INT, 0, AT(checkpoint_every), .ilo = 0, .ihi = SPEC_MAX_ITERATIONS,
     .help = "a checkpoint every that many iterations; 0: only when the job is stopped and at the end. "
             "Each checkpoint replaces the one before"},
    {"eval_every", SPEC_T_INT, 0, AT(eval_every), .ilo = 0, .ihi = SPEC_MAX_ITERATIONS,
     .check = spec_check_eval_every,
     .help = "needs `data.test`: an evaluation after iteration `i` whenever `(i + 1) % eval_every == 0`, and "
             "always after the last; 0: only after the last"},
    {"init", SPEC_T_FORM, 0, .words = WORDS(inits), .form = &spec_form_init,
     .shows = "`\"kaiming_uniform\"` for `linear`, `\"default\"` otherwise",
     .accepts = "`\"kaiming_uniform\"`, `\"default\"`, or `{\"from\": ...}`",
     .help = "`kaiming_uniform`: PyTorch's `kaiming_uniform_` defaults on every parameter; `default`: "
             "PyTorch's own `nn.Linear` initialisation; with the same `seed`, both equal PyTorch's values "
             "after `torch.manual_seed(seed)`"},
    {"init.from", SPEC_T_STRING, SPEC_F_REQUIRED, AT(init_from), .check = spec_check_init_from,
     .accepts = "a job id (16 hex digits) or a `.safetensors` path or URL (`file://`, `s3://`, `http(s)://`)",
     .help = "start from these parameters (`model.load_state_dict`): a job's latest checkpoint, or a file "
             "with PyTorch `state_dict` names; names and shapes must match the model"},
};

const size_t spec_n_fields = sizeof spec_fields / sizeof spec_fields[0];

const struct spec_field *spec_field_find(const char *path)
{
    for (size_t i = 0; i < spec_n_fields; i++)
        if (strcmp(spec_fields[i].path, path) == 0)
            return &spec_fields[i];
    return NULL;
}

const char *spec_field_key(const struct spec_field *f)
{
    const char *dot = strrchr(f->path, '.');
    return dot ? dot + 1 : f->path;
}

bool spec_field_is_child(const struct spec_field *f, const char *parent)
{
    size_t n = strlen(parent);
    if (n == 0)
        return strchr(f->path, '.') == NULL;
    return strncmp(f->path, parent, n) == 0 && f->path[n] == '.' && !strchr(f->path + n + 1, '.');
}

/* "sgd", "adam and adamw", "mlp": who takes a field that only some take, for messages and docs. */
void spec_field_takers(const struct spec_field *f, char *buf, size_t cap)
{
    const struct spec_field *kinds = spec_field_find(f->optimizers ? "optimizer.type" : "model.type");
    unsigned mask = f->optimizers ? f->optimizers : f->models;
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < kinds->n_words && len < cap; i++)
        if (mask & (1u << i)) {
            bool last = !(mask >> (i + 1));
            int n = snprintf(buf + len, cap - len, "%s%s", len ? (last ? " and " : ", ") : "", kinds->words[i]);
            len += n > 0 ? (size_t)n : 0;
        }
}

/* Unknown keys are refused rather than ignored, so a typo never trains the wrong model. */
int spec_check_known(const json_t *obj, const char *path, struct spec_error *se)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        bool known = false;
        for (size_t i = 0; i < spec_n_fields && !known; i++)
            known = spec_field_is_child(&spec_fields[i], path) && strcmp(spec_field_key(&spec_fields[i]), key) == 0;
        if (!known)
            return spec_fail(se, path, key, "unknown field '%s'", key);
    }
    return 0;
}
