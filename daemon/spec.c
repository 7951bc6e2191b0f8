/* spec.c — validating a job spec field by field and filling the defaults of DESIGN.md §3. */
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_impl.h"

/* Strings of data that the spec copies once everything validated. */
struct data_strings {
    const char *train, *test, *shards, *endpoint, *region;
};

/* scheme://user:password@host/...: credentials would be stored, shown by GET /jobs/{id} and logged. */
static int refuse_userinfo(const char *url, const char *key, struct spec_error *se)
{
    const char *p = url ? strstr(url, "://") : NULL;
    if (!p)
        return 0;
    p += 3;
    size_t host = strcspn(p, "/?#");
    if (memchr(p, '@', host))
        return spec_fail(se, "data", key, "must not carry credentials (user:password@); give them to the "
                         "daemon as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY instead");
    return 0;
}

static int parse_shuffle(const json_t *d, struct job_spec *s, struct spec_error *se)
{
    static const char *const known[] = {"partitions", "buffer", NULL};
    const json_t *sh = json_object_get(d, "shuffle");
    if (json_is_null(sh))
        return 0; /* null: no shuffling, as with the field left out */
    if (spec_get_object(d, "data", "shuffle", false, &sh, se))
        return -1;
    if (!sh)
        return 0;
    return spec_check_fields(sh, "data.shuffle", known, se) ||
           spec_get_bool(sh, "data.shuffle", "partitions", &s->data.shuffle_partitions, se) ||
           spec_get_int(sh, "data.shuffle", "buffer", 0, SPEC_MAX_SHUFFLE_BUFFER, &s->data.shuffle_buffer, se)
               ? -1 : 0;
}

static int parse_data(const json_t *root, struct job_spec *s, struct data_strings *str,
                      struct spec_error *se)
{
    static const char *const known[] = {"train", "test", "shards", "header", "label", "features",
                                        "drop_last", "format", "region", "shuffle", "endpoint",
                                        "anonymous", NULL};
    const json_t *d;
    if (spec_get_object(root, "", "data", true, &d, se) || spec_check_fields(d, "data", known, se))
        return -1;
    if (!json_object_get(d, "train"))
        return spec_fail(se, "data", "train", "is required: the URL or path of the CSV partitions");
    if (spec_get_string(d, "data", "train", false, &str->train, se) ||
        spec_get_string(d, "data", "test", true, &str->test, se) ||
        spec_get_string(d, "data", "shards", true, &str->shards, se) ||
        refuse_userinfo(str->train, "train", se) || refuse_userinfo(str->test, "test", se) ||
        refuse_userinfo(str->shards, "shards", se))
        return -1;

    const json_t *h = json_object_get(d, "header");
    if (h && json_is_boolean(h))
        s->data.header = json_is_true(h) ? SPEC_HEADER_YES : SPEC_HEADER_NO;
    else if (h && json_is_string(h) && strcmp(json_string_value(h), "auto") == 0)
        s->data.header = SPEC_HEADER_AUTO;
    else if (h)
        return spec_fail(se, "data", "header", "must be \"auto\", true or false");

    int64_t label = s->data.label;
    if (spec_get_int(d, "data", "label", 0, 65535, &label, se))
        return -1;
    s->data.label = (int)label;

    const char *features = "rest";
    if (spec_get_string(d, "data", "features", false, &features, se))
        return -1;
    if (strcmp(features, "rest") != 0)
        return spec_fail(se, "data", "features", "only \"rest\" (every column but the label) is supported yet");
    const char *format = "csv";
    if (spec_get_string(d, "data", "format", false, &format, se))
        return -1;
    if (strcmp(format, "csv") != 0)
        return spec_fail(se, "data", "format", "only \"csv\" is supported yet");
    return spec_get_string(d, "data", "region", true, &str->region, se) ||
           spec_get_string(d, "data", "endpoint", true, &str->endpoint, se) ||
           refuse_userinfo(str->endpoint, "endpoint", se) ||
           spec_get_bool(d, "data", "anonymous", &s->data.anonymous, se) ||
           spec_get_bool(d, "data", "drop_last", &s->data.drop_last, se) || parse_shuffle(d, s, se)
               ? -1 : 0;
}

static const char *const layer_names[] = {
    [SPEC_LAYER_LINEAR] = "linear", [SPEC_LAYER_RELU] = "relu", [SPEC_LAYER_SIGMOID] = "sigmoid",
    [SPEC_LAYER_TANH] = "tanh", [SPEC_LAYER_SOFTMAX] = "softmax",
};

static int layer_kind(const char *name, enum spec_layer *out)
{
    for (int i = 0; i <= SPEC_LAYER_SOFTMAX; i++)
        if (strcmp(name, layer_names[i]) == 0) {
            *out = (enum spec_layer)i;
            return 0;
        }
    return -1;
}

/* {"type":"mlp","hidden":[256,256],"activation":"relu","outputs":N} */
static int parse_mlp(const json_t *m, struct job_spec *s, struct spec_error *se)
{
    const json_t *h = json_object_get(m, "hidden");
    if (!json_is_array(h) || json_array_size(h) == 0 || json_array_size(h) > SPEC_MAX_LAYERS - 1)
        return spec_fail(se, "model", "hidden", "must be an array of 1 to %d layer widths, like [256, 256]",
                         SPEC_MAX_LAYERS - 1);
    for (size_t i = 0; i < json_array_size(h); i++) {
        json_int_t w = json_integer_value(json_array_get(h, i));
        if (!json_is_integer(json_array_get(h, i)) || w < 1 || w > SPEC_MAX_WIDTH)
            return spec_fail(se, "model", "hidden", "item %zu must be an integer from 1 to %d", i, SPEC_MAX_WIDTH);
        s->net.hidden[s->net.n_hidden++] = w;
    }
    const char *act = "relu";
    if (spec_get_string(m, "model", "activation", false, &act, se))
        return -1;
    if (layer_kind(act, &s->net.activation) || s->net.activation == SPEC_LAYER_LINEAR ||
        s->net.activation == SPEC_LAYER_SOFTMAX)
        return spec_fail(se, "model", "activation", "must be \"relu\", \"sigmoid\" or \"tanh\"");
    return spec_get_int(m, "model", "outputs", 1, SPEC_MAX_WIDTH, &s->net.outputs, se) ? -1 : 0;
}

/* {"layers":[{"linear":256},{"relu":{}},{"linear":1}]}: nn.Sequential as written. */
static int parse_layers(const json_t *m, struct job_spec *s, struct spec_error *se)
{
    const json_t *l = json_object_get(m, "layers");
    if (!json_is_array(l) || json_array_size(l) == 0 || json_array_size(l) > SPEC_MAX_LAYERS)
        return spec_fail(se, "model", "layers", "must be an array of 1 to %d layers, like "
                         "[{\"linear\": 256}, {\"relu\": {}}, {\"linear\": 1}]", SPEC_MAX_LAYERS);
    bool any_linear = false;
    for (size_t i = 0; i < json_array_size(l); i++) {
        const json_t *item = json_array_get(l, i);
        const char *key = json_is_object(item) && json_object_size(item) == 1
                              ? json_object_iter_key(json_object_iter((json_t *)item)) : NULL;
        struct spec_layer_def *d = &s->net.layers[s->net.n_layers++];
        char path[48];
        snprintf(path, sizeof path, "model.layers[%u]", (unsigned)i);
        if (!key || layer_kind(key, &d->kind))
            return spec_fail(se, path, NULL, "must be one of {\"linear\": N}, {\"relu\": {}}, "
                             "{\"sigmoid\": {}}, {\"tanh\": {}}, {\"softmax\": {}}");
        const json_t *v = json_object_get(item, key);
        if (d->kind == SPEC_LAYER_LINEAR) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > SPEC_MAX_WIDTH)
                return spec_fail(se, path, key, "must be the layer's output width, an integer from 1 to %d",
                                 SPEC_MAX_WIDTH);
            d->out = json_integer_value(v);
            any_linear = true;
        } else if (!json_is_object(v) || json_object_size(v) != 0) {
            return spec_fail(se, path, key, "takes no options: write {}");
        }
    }
    if (!any_linear)
        return spec_fail(se, "model", "layers", "needs at least one {\"linear\": N} layer");
    return 0;
}

static int parse_model(const json_t *root, struct job_spec *s, struct spec_error *se)
{
    static const char *const known[] = {"type", "hidden", "activation", "outputs", "layers", NULL};
    const json_t *m;
    if (spec_get_object(root, "", "model", false, &m, se))
        return -1;
    if (!m)
        return 0;
    if (spec_check_fields(m, "model", known, se))
        return -1;
    const char *type = json_object_get(m, "layers") ? "layers" : "linear";
    if (spec_get_string(m, "model", "type", false, &type, se))
        return -1;
    if (strcmp(type, "layers") == 0) {
        if (json_object_get(m, "hidden") || json_object_get(m, "activation") || json_object_get(m, "outputs"))
            return spec_fail(se, "model", "layers", "goes alone: the last {\"linear\": N} sets the outputs");
        s->model = SPEC_MODEL_LAYERS;
        return parse_layers(m, s, se);
    }
    if (json_object_get(m, "layers"))
        return spec_fail(se, "model", "type", "must be left out (or \"layers\") when layers are given");
    if (strcmp(type, "mlp") == 0) {
        s->model = SPEC_MODEL_MLP;
        return parse_mlp(m, s, se);
    }
    if (strcmp(type, "linear") != 0)
        return spec_fail(se, "model", "type", "unknown model type \"%s\"; use \"linear\", \"mlp\" or give "
                         "\"layers\"", type);
    for (int i = 1; known[i]; i++)
        if (json_object_get(m, known[i]))
            return spec_fail(se, "model", known[i], "is for \"mlp\" or \"layers\" models, not \"linear\"");
    return 0;
}

/* betas: [beta1, beta2], each in [0, 1). */
static int get_betas(const json_t *o, double *b1, double *b2, struct spec_error *se)
{
    const json_t *v = json_object_get(o, "betas");
    if (!v)
        return 0;
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
        !json_is_number(json_array_get(v, 1)))
        return spec_fail(se, "optimizer", "betas", "must be an array of two numbers, like [0.9, 0.999]");
    double x = json_number_value(json_array_get(v, 0)), y = json_number_value(json_array_get(v, 1));
    if (!(x >= 0 && x < 1) || !(y >= 0 && y < 1))
        return spec_fail(se, "optimizer", "betas", "each beta must be at least 0 and below 1");
    *b1 = x;
    *b2 = y;
    return 0;
}

/* A field that only some optimizers take, present with another: refused, not ignored. */
static int only_for(const json_t *o, const char *key, const char *type, const char *which,
                    struct spec_error *se)
{
    if (json_object_get(o, key))
        return spec_fail(se, "optimizer", key, "'%s' is for %s, not \"%s\"", key, which, type);
    return 0;
}

/* torch.optim's defaults per type (SGD's lr is the reference workflow's; torch has none). */
static void optimizer_defaults(struct job_spec *s, enum spec_optim type)
{
    s->optimizer.type = type;
    s->optimizer.lr = type == SPEC_OPTIM_SGD ? 0.03 : 1e-3;
    s->optimizer.weight_decay = type == SPEC_OPTIM_ADAMW ? 1e-2 : 0.0;
    s->optimizer.momentum = 0.0;
    s->optimizer.nesterov = false;
    s->optimizer.beta1 = 0.9;
    s->optimizer.beta2 = 0.999;
    s->optimizer.eps = 1e-8;
}

static int parse_optimizer(const json_t *root, struct job_spec *s, struct spec_error *se)
{
    static const char *const known[] = {"type", "lr", "momentum", "weight_decay", "nesterov",
                                        "betas", "eps", NULL};
    static const char *const types[] = {"sgd", "adam", "adamw", NULL};
    optimizer_defaults(s, SPEC_OPTIM_SGD);
    const json_t *o;
    if (spec_get_object(root, "", "optimizer", false, &o, se))
        return -1;
    if (!o)
        return 0;
    if (spec_check_fields(o, "optimizer", known, se))
        return -1;
    const char *type = "sgd";
    if (spec_get_string(o, "optimizer", "type", false, &type, se))
        return -1;
    int t = 0;
    while (types[t] && strcmp(type, types[t]) != 0)
        t++;
    if (!types[t])
        return spec_fail(se, "optimizer", "type", "unknown optimizer \"%s\"; use \"sgd\", \"adam\" or \"adamw\"", type);
    optimizer_defaults(s, (enum spec_optim)t);
    if (spec_get_real(o, "optimizer", "lr", 0.0, true, 1e6, &s->optimizer.lr, se) ||
        spec_get_real(o, "optimizer", "weight_decay", 0.0, false, 1e6, &s->optimizer.weight_decay, se))
        return -1;
    if (t == SPEC_OPTIM_SGD) {
        if (only_for(o, "betas", type, "adam and adamw", se) ||
            only_for(o, "eps", type, "adam and adamw", se) ||
            spec_get_real(o, "optimizer", "momentum", 0.0, false, 0.999999, &s->optimizer.momentum, se) ||
            spec_get_bool(o, "optimizer", "nesterov", &s->optimizer.nesterov, se))
            return -1;
        if (s->optimizer.nesterov && s->optimizer.momentum == 0.0)
            return spec_fail(se, "optimizer", "nesterov", "needs momentum > 0, as in torch.optim.SGD");
        return 0;
    }
    return only_for(o, "momentum", type, "sgd", se) || only_for(o, "nesterov", type, "sgd", se) ||
           get_betas(o, &s->optimizer.beta1, &s->optimizer.beta2, se) ||
           spec_get_real(o, "optimizer", "eps", 0.0, true, 1.0, &s->optimizer.eps, se);
}

static json_t *optimizer_json(const struct job_spec *s)
{
    static const char *const types[] = {"sgd", "adam", "adamw"};
    json_t *o = json_pack("{s:s, s:f, s:f}", "type", types[s->optimizer.type], "lr", s->optimizer.lr,
                          "weight_decay", s->optimizer.weight_decay);
    if (!o)
        return NULL;
    if (s->optimizer.type == SPEC_OPTIM_SGD) {
        json_object_set_new(o, "momentum", json_real(s->optimizer.momentum));
        json_object_set_new(o, "nesterov", json_boolean(s->optimizer.nesterov));
    } else {
        json_object_set_new(o, "betas", json_pack("[f, f]", s->optimizer.beta1, s->optimizer.beta2));
        json_object_set_new(o, "eps", json_real(s->optimizer.eps));
    }
    return o;
}

/* iterations or epochs, exactly one (null counts as left out, as GET /jobs/{id} writes the other). */
static int parse_length(const json_t *root, struct job_spec *s, struct spec_error *se)
{
    const json_t *it = json_object_get(root, "iterations"), *ep = json_object_get(root, "epochs");
    bool has_it = it && !json_is_null(it), has_ep = ep && !json_is_null(ep);
    if (has_it && has_ep)
        return spec_fail(se, "", "epochs", "give iterations or epochs, not both");
    if (!has_it && !has_ep)
        return spec_fail(se, "", "iterations", "is required (or epochs): how long to train");
    if (has_ep)
        return spec_get_int(root, "", "epochs", 1, SPEC_MAX_EPOCHS, &s->epochs, se);
    return spec_get_int(root, "", "iterations", 1, SPEC_MAX_ITERATIONS, &s->iterations, se);
}

/* A job id as job.c makes them: 16 lowercase hex digits. */
static bool is_job_id(const char *v)
{
    if (strlen(v) != 16)
        return false;
    for (; *v; v++)
        if (!((*v >= '0' && *v <= '9') || (*v >= 'a' && *v <= 'f')))
            return false;
    return true;
}

bool spec_init_from_job(const struct job_spec *s)
{
    return s->init_from && is_job_id(s->init_from);
}

/* init.from: a job id, or a file://, s3://, http(s):// URL or a path of a .safetensors file. */
static int check_init_from(const char *v, struct spec_error *se)
{
    if (is_job_id(v))
        return 0;
    const char *sep = strstr(v, "://");
    if (sep) {
        static const char *const schemes[] = {"file", "s3", "http", "https", NULL};
        size_t n = (size_t)(sep - v);
        int i = 0;
        while (schemes[i] && !(strlen(schemes[i]) == n && strncmp(v, schemes[i], n) == 0))
            i++;
        if (!schemes[i])
            return spec_fail(se, "init", "from", "\"%.*s://\" is not a scheme traind reads; use file://, "
                             "s3://, http:// or https://", (int)(n < 16 ? n : 16), v);
        size_t host = strcspn(sep + 3, "/?#");
        if (memchr(sep + 3, '@', host))
            return spec_fail(se, "init", "from", "must not carry credentials (user:password@); give them to "
                             "the daemon as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY instead");
    }
    size_t path = strcspn(v, "?#");
    static const char suffix[] = ".safetensors";
    if (path < sizeof suffix || strncmp(v + path - (sizeof suffix - 1), suffix, sizeof suffix - 1) != 0)
        return spec_fail(se, "init", "from", "must be a job id (16 hex digits) or the URL or path of a "
                         ".safetensors file");
    return 0;
}

/* init: "kaiming_uniform", "default", or {"from": ...}; *from stays NULL for the names. */
static int parse_init(const json_t *root, int *init, const char **from, struct spec_error *se)
{
    static const char *const inits[] = {"kaiming_uniform", "default", NULL};
    const json_t *v = json_object_get(root, "init");
    if (!json_is_object(v))
        return spec_get_choice(root, "init", inits, init, se);
    static const char *const known[] = {"from", NULL};
    if (spec_check_fields(v, "init", known, se))
        return -1;
    if (!json_object_get(v, "from"))
        return spec_fail(se, "init", "from", "is required: a job id or the URL of a .safetensors file");
    return spec_get_string(v, "init", "from", false, from, se) || check_init_from(*from, se) ? -1 : 0;
}

/* eval_every: iterations between evaluations on data.test, which it needs (0 is always fine). */
static int parse_eval_every(const json_t *root, const char *test, int64_t *out, struct spec_error *se)
{
    if (spec_get_int(root, "", "eval_every", 0, SPEC_MAX_ITERATIONS, out, se))
        return -1;
    if (*out > 0 && !test)
        return spec_fail(se, "", "eval_every", "needs data.test: the URL or path of the CSV partitions "
                         "to evaluate on");
    return 0;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

int spec_parse(const json_t *root, struct job_spec **out, struct spec_error *se)
{
    static const char *const known[] = {"name", "client_id", "priority", "data", "model", "loss",
                                        "optimizer", "clip_grad_norm", "batch_size", "iterations",
                                        "dtype", "device", "seed", "init", "checkpoint_every",
                                        "epochs", "eval_every", NULL};
    memset(se, 0, sizeof *se);
    *out = NULL;
    if (!json_is_object(root))
        return spec_fail(se, "", "", "the job spec must be a JSON object, not %s", spec_type_name(root));
    if (spec_check_fields(root, "", known, se))
        return -1;

    struct job_spec s = {
        .data = {.header = SPEC_HEADER_AUTO, .label = 0, .drop_last = false},
        .model = SPEC_MODEL_LINEAR,
        .loss = SPEC_LOSS_MSE,
        .batch_size = 1048576,
        .dtype = SPEC_FLOAT64,
        .device = SPEC_DEVICE_AUTO,
    };
    const char *name = NULL, *client_id = NULL, *init_from = NULL;
    struct data_strings ds = {0};
    int64_t priority = 0, seed = 0;
    int loss = 0, dtype = SPEC_FLOAT64, device = 0, init = 0;
    static const char *const losses[] = {"mse", "cross_entropy", "bce", NULL};
    static const char *const dtypes[] = {"float32", "float64", NULL};

    if (spec_get_string(root, "", "name", true, &name, se) ||
        spec_get_string(root, "", "client_id", true, &client_id, se) ||
        spec_get_int(root, "", "priority", -1000, 1000, &priority, se) ||
        parse_data(root, &s, &ds, se) || parse_model(root, &s, se))
        return -1;
    if (json_is_object(json_object_get(root, "loss")))
        return spec_fail(se, "", "loss", "must be a string such as \"mse\"");
    if (spec_get_choice(root, "loss", losses, &loss, se) ||
        parse_optimizer(root, &s, se))
        return -1;

    const json_t *clip = json_object_get(root, "clip_grad_norm");
    if (clip && !json_is_null(clip) &&
        spec_get_real(root, "", "clip_grad_norm", 0.0, true, 1e12, &s.clip_grad_norm, se))
        return -1;
    if (spec_get_int(root, "", "batch_size", 1, SPEC_MAX_BATCH_SIZE, &s.batch_size, se))
        return -1;
    if (parse_length(root, &s, se) ||
        spec_get_choice(root, "dtype", dtypes, &dtype, se))
        return -1;
    if (spec_parse_device(root, &s, &device, se) ||
        spec_get_int(root, "", "seed", 0, INT64_MAX, &seed, se) ||
        spec_get_int(root, "", "checkpoint_every", 0, SPEC_MAX_ITERATIONS, &s.checkpoint_every, se) ||
        parse_eval_every(root, ds.test, &s.eval_every, se))
        return -1;
    /* The reference's kaiming_uniform_ for its linear model; PyTorch's own nn.Linear init
     * for networks, as a PyTorch user building nn.Sequential gets. */
    init = s.model == SPEC_MODEL_LINEAR ? SPEC_INIT_KAIMING_UNIFORM : SPEC_INIT_DEFAULT;
    if (parse_init(root, &init, &init_from, se))
        return -1;
    if (loss == SPEC_LOSS_CROSS_ENTROPY && s.model == SPEC_MODEL_LINEAR)
        return spec_fail(se, "", "loss", "cross_entropy needs one output per class: use an \"mlp\" or "
                         "\"layers\" model");

    s.priority = (int)priority;
    s.seed = (uint64_t)seed;
    s.loss = (enum spec_loss)loss;
    s.init = (enum spec_init)init;
    s.dtype = (enum spec_dtype)dtype;
    s.device = (enum spec_device)device;

    struct job_spec *p = malloc(sizeof *p);
    if (!p)
        return spec_fail(se, "", "", "out of memory");
    *p = s;
    p->name = dup_or_null(name);
    p->client_id = dup_or_null(client_id);
    p->data.train = dup_or_null(ds.train);
    p->data.test = dup_or_null(ds.test);
    p->data.shards = dup_or_null(ds.shards);
    p->data.endpoint = dup_or_null(ds.endpoint);
    p->data.region = dup_or_null(ds.region);
    p->init_from = dup_or_null(init_from);
    if ((name && !p->name) || (client_id && !p->client_id) || !p->data.train ||
        (init_from && !p->init_from) || (ds.test && !p->data.test) ||
        (ds.shards && !p->data.shards) || (ds.endpoint && !p->data.endpoint) ||
        (ds.region && !p->data.region)) {
        spec_free(p);
        return spec_fail(se, "", "", "out of memory");
    }
    *out = p;
    return 0;
}

void spec_free(struct job_spec *s)
{
    if (!s)
        return;
    free(s->name);
    free(s->client_id);
    free(s->data.train);
    free(s->data.test);
    free(s->data.shards);
    free(s->data.endpoint);
    free(s->data.region);
    free(s->init_from);
    free(s);
}

static json_t *string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *model_json(const struct job_spec *s)
{
    if (s->model == SPEC_MODEL_LINEAR)
        return json_pack("{s:s}", "type", "linear");
    if (s->model == SPEC_MODEL_MLP) {
        json_t *hidden = json_array();
        for (int i = 0; i < s->net.n_hidden; i++)
            json_array_append_new(hidden, json_integer(s->net.hidden[i]));
        return json_pack("{s:s, s:o, s:s, s:o}", "type", "mlp", "hidden", hidden, "activation",
                         layer_names[s->net.activation], "outputs",
                         s->net.outputs ? json_integer(s->net.outputs) : json_null());
    }
    json_t *layers = json_array();
    for (int i = 0; i < s->net.n_layers; i++) {
        const struct spec_layer_def *d = &s->net.layers[i];
        json_array_append_new(layers, json_pack("{s:o}", layer_names[d->kind],
                                                d->kind == SPEC_LAYER_LINEAR ? json_integer(d->out)
                                                                             : json_object()));
    }
    return json_pack("{s:o}", "layers", layers);
}

/* data.test and eval_every, set on o after the rest so the big pack below stays as it is. */
static json_t *add_eval_json(json_t *o, const struct job_spec *s)
{
    if (o && (json_object_set_new(json_object_get(o, "data"), "test", string_or_null(s->data.test)) ||
              json_object_set_new(o, "eval_every", json_integer((json_int_t)s->eval_every)))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *spec_to_json(const struct job_spec *s)
{
    static const char *const losses[] = {"mse", "cross_entropy", "bce"};
    static const char *const headers[] = {"auto", "true", "false"};
    json_t *header = s->data.header == SPEC_HEADER_AUTO ? json_string(headers[0])
                                                        : json_boolean(s->data.header == SPEC_HEADER_YES);
    return add_eval_json(json_pack(
        "{s:o, s:o, s:i, s:{s:s, s:o, s:s, s:o, s:i, s:s, s:b, s:{s:b, s:I}, s:o, s:o, s:b},"
        " s:o, s:s,"
        " s:o, s:o, s:I, s:o, s:o, s:s, s:o, s:I, s:o, s:I}",
        "name", string_or_null(s->name),
        "client_id", string_or_null(s->client_id),
        "priority", s->priority,
        "data",
            "train", s->data.train,
            "shards", string_or_null(s->data.shards),
            "format", "csv",
            "header", header,
            "label", s->data.label,
            "features", "rest",
            "drop_last", s->data.drop_last,
            "shuffle", "partitions", s->data.shuffle_partitions,
                       "buffer", (json_int_t)s->data.shuffle_buffer,
            "endpoint", string_or_null(s->data.endpoint),
            "region", string_or_null(s->data.region),
            "anonymous", s->data.anonymous,
        "model", model_json(s),
        "loss", losses[s->loss],
        "optimizer", optimizer_json(s),
        "clip_grad_norm", s->clip_grad_norm > 0 ? json_real(s->clip_grad_norm) : json_null(),
        "batch_size", (json_int_t)s->batch_size,
        "iterations", s->iterations ? json_integer((json_int_t)s->iterations) : json_null(),
        "epochs", s->epochs ? json_integer((json_int_t)s->epochs) : json_null(),
        "dtype", s->dtype == SPEC_FLOAT32 ? "float32" : "float64",
        "device", spec_device_json(s),
        "seed", (json_int_t)s->seed,
        "init", s->init_from ? json_pack("{s:s}", "from", s->init_from)
                             : json_string(s->init == SPEC_INIT_KAIMING_UNIFORM ? "kaiming_uniform"
                                                                                : "default"),
        "checkpoint_every", (json_int_t)s->checkpoint_every), s);
}
