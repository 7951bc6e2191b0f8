/* spec_forms.c — the job spec's fields with more than one JSON shape, and the checks between fields. */
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_impl.h"
#include "spec_schema.h"

/* v for a form's dump, noting when making it ran out of memory. */
static json_t *made(json_t *v, bool *failed)
{
    *failed = !v;
    return v;
}

/* {"type": "string", "enum": [f's words]}: the words a FORM row takes. */
static json_t *words_schema(const struct spec_field *f)
{
    json_t *words = json_array();
    for (int i = 0; words && i < f->n_words; i++)
        if (f->words[i])
            json_array_append_new(words, json_string(f->words[i]));
    return json_pack("{s:s, s:o*}", "type", "string", "enum", words);
}

/* A row's word, the way its words read it: for model.type, optimizer.type and init. */
static int read_word(const struct spec_field *f, const json_t *obj, const char *dflt, int *out,
                     struct spec_error *se)
{
    char parent[64];
    const char *dot = strrchr(f->path, '.'), *v = dflt;
    snprintf(parent, sizeof parent, "%.*s", dot ? (int)(dot - f->path) : 0, f->path);
    if (spec_get_string(obj, parent, spec_field_key(f), false, &v, se))
        return -1;
    *out = spec_word_index(f, v);
    return *out < 0 ? spec_refuse_word(f, v, se) : 0;
}

/* "type" may be left out: "layers" when layers are given, "linear" otherwise. */
static int parse_model_type(const struct spec_field *f, const json_t *obj, const json_t *v, struct job_spec *s,
                            struct spec_error *se)
{
    (void)v;
    bool layers = json_object_get(obj, "layers") != NULL;
    int kind;
    if (read_word(f, obj, layers ? "layers" : "linear", &kind, se))
        return -1;
    if (layers && kind != SPEC_MODEL_LAYERS)
        return spec_fail(se, "model", "type", "must be left out (or \"layers\") when layers are given");
    s->model = (enum spec_model)kind;
    return 0;
}

static json_t *dump_model_type(const struct job_spec *s, bool *failed)
{
    return made(json_string(spec_field_find("model.type")->words[s->model]), failed);
}

/* No default: "layers" when layers are given, "linear" otherwise. */
static json_t *schema_model_type(const struct spec_field *f, json_t *object)
{
    (void)object;
    return words_schema(f);
}

const struct spec_form spec_form_model_type = {parse_model_type, dump_model_type, schema_model_type};

/* "hidden": [256, 256], every width in 1 .. SPEC_MAX_WIDTH. */
static int parse_hidden(const struct spec_field *f, const json_t *obj, const json_t *h, struct job_spec *s,
                        struct spec_error *se)
{
    (void)f;
    (void)obj;
    if (!json_is_array(h) || json_array_size(h) == 0 || json_array_size(h) > SPEC_MAX_LAYERS - 1)
        return spec_fail(se, "model", "hidden", "must be an array of 1 to %d layer widths, like [256, 256]",
                         SPEC_MAX_LAYERS - 1);
    s->net.n_hidden = 0;
    for (size_t i = 0; i < json_array_size(h); i++) {
        json_int_t w = json_integer_value(json_array_get(h, i));
        if (!json_is_integer(json_array_get(h, i)) || w < 1 || w > SPEC_MAX_WIDTH)
            return spec_fail(se, "model", "hidden", "item %zu must be an integer from 1 to %d", i, SPEC_MAX_WIDTH);
        s->net.hidden[s->net.n_hidden++] = w;
    }
    return 0;
}

static json_t *dump_hidden(const struct job_spec *s, bool *failed)
{
    json_t *a = json_array();
    for (int i = 0; a && i < s->net.n_hidden; i++)
        if (json_array_append_new(a, json_integer(s->net.hidden[i]))) {
            json_decref(a);
            a = NULL;
        }
    return made(a, failed);
}

static json_t *schema_hidden(const struct spec_field *f, json_t *object)
{
    (void)f;
    (void)object;
    return json_pack("{s:s, s:{s:s, s:i, s:i}, s:i, s:i}", "type", "array", "items", "type", "integer", "minimum", 1,
                     "maximum", SPEC_MAX_WIDTH, "minItems", 1, "maxItems", SPEC_MAX_LAYERS - 1);
}

const struct spec_form spec_form_hidden = {parse_hidden, dump_hidden, schema_hidden};

static const char *const layer_names[] = {
    [NN_LAYER_LINEAR] = "linear", [NN_LAYER_RELU] = "relu", [NN_LAYER_SIGMOID] = "sigmoid",
    [NN_LAYER_TANH] = "tanh", [NN_LAYER_SOFTMAX] = "softmax",
};

/* One {"linear": N} or {"relu": {}} of model.layers. */
static int parse_layer(const json_t *item, size_t i, struct nn_layer_spec *d, struct spec_error *se)
{
    char path[48];
    snprintf(path, sizeof path, "model.layers[%u]", (unsigned)i);
    const char *key = json_is_object(item) && json_object_size(item) == 1
                          ? json_object_iter_key(json_object_iter((json_t *)item)) : NULL;
    int k = 0;
    while (key && k <= NN_LAYER_SOFTMAX && strcmp(key, layer_names[k]) != 0)
        k++;
    if (!key || k > NN_LAYER_SOFTMAX)
        return spec_fail(se, "", path, "must be one of {\"linear\": N}, {\"relu\": {}}, {\"sigmoid\": {}}, "
                         "{\"tanh\": {}}, {\"softmax\": {}}");
    const json_t *v = json_object_get(item, key);
    *d = (struct nn_layer_spec){.kind = (enum nn_layer_kind)k};
    if (k == NN_LAYER_LINEAR) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > SPEC_MAX_WIDTH)
            return spec_fail(se, path, key, "must be the layer's output width, an integer from 1 to %d",
                             SPEC_MAX_WIDTH);
        d->out_features = json_integer_value(v);
    } else if (!json_is_object(v) || json_object_size(v) != 0) {
        return spec_fail(se, path, key, "takes no options: write {}");
    }
    return 0;
}

/* {"layers":[{"linear":256},{"relu":{}},{"linear":1}]}: nn.Sequential as written. */
static int parse_layers(const struct spec_field *f, const json_t *obj, const json_t *l, struct job_spec *s,
                        struct spec_error *se)
{
    (void)f;
    (void)obj;
    if (!json_is_array(l) || json_array_size(l) == 0 || json_array_size(l) > SPEC_MAX_LAYERS)
        return spec_fail(se, "model", "layers", "must be an array of 1 to %d layers, like "
                         "[{\"linear\": 256}, {\"relu\": {}}, {\"linear\": 1}]", SPEC_MAX_LAYERS);
    bool any_linear = false;
    s->net.n_layers = 0;
    for (size_t i = 0; i < json_array_size(l); i++) {
        struct nn_layer_spec *d = &s->net.layers[s->net.n_layers++];
        if (parse_layer(json_array_get(l, i), i, d, se))
            return -1;
        any_linear |= d->kind == NN_LAYER_LINEAR;
    }
    if (!any_linear)
        return spec_fail(se, "model", "layers", "needs at least one {\"linear\": N} layer");
    return 0;
}

static json_t *dump_layers(const struct job_spec *s, bool *failed)
{
    json_t *a = json_array();
    for (int i = 0; a && i < s->net.n_layers; i++) {
        const struct nn_layer_spec *d = &s->net.layers[i];
        json_t *v = d->kind == NN_LAYER_LINEAR ? json_integer(d->out_features) : json_object();
        if (json_array_append_new(a, json_pack("{s:o}", layer_names[d->kind], v))) {
            json_decref(a);
            a = NULL;
        }
    }
    return made(a, failed);
}

/* Each layer one of {"linear": N} and {"relu": {}}, ... as parse_layer reads them. */
static json_t *schema_layers(const struct spec_field *f, json_t *object)
{
    (void)f;
    (void)object;
    json_t *kinds = json_array();
    for (int k = 0; kinds && k <= NN_LAYER_SOFTMAX; k++) {
        json_t *v = k == NN_LAYER_LINEAR
                        ? json_pack("{s:s, s:i, s:i}", "type", "integer", "minimum", 1, "maximum", SPEC_MAX_WIDTH)
                        : json_pack("{s:s, s:i}", "type", "object", "maxProperties", 0);
        json_array_append_new(kinds, json_pack("{s:s, s:{s:o*}, s:[s], s:b}", "type", "object", "properties",
                                               layer_names[k], v, "required", layer_names[k],
                                               "additionalProperties", 0));
    }
    return json_pack("{s:s, s:{s:o*}, s:i, s:i}", "type", "array", "items", "oneOf", kinds, "minItems", 1,
                     "maxItems", SPEC_MAX_LAYERS);
}

const struct spec_form spec_form_layers = {parse_layers, dump_layers, schema_layers};

/* data.header: "auto", true or false. */
static int parse_header(const struct spec_field *f, const json_t *obj, const json_t *h, struct job_spec *s,
                        struct spec_error *se)
{
    (void)obj;
    if (!h)
        return 0;
    if (json_is_boolean(h))
        s->data.header = json_is_true(h) ? SPEC_HEADER_YES : SPEC_HEADER_NO;
    else if (json_is_string(h) && strcmp(json_string_value(h), "auto") == 0)
        s->data.header = SPEC_HEADER_AUTO;
    else
        return spec_fail(se, "", f->path, "must be \"auto\", true or false");
    return 0;
}

static json_t *dump_header(const struct job_spec *s, bool *failed)
{
    return made(s->data.header == SPEC_HEADER_AUTO ? json_string("auto")
                                                   : json_boolean(s->data.header == SPEC_HEADER_YES), failed);
}

static json_t *schema_header(const struct spec_field *f, json_t *object)
{
    (void)f;
    (void)object;
    return json_pack("{s:[s, b, b], s:s}", "enum", "auto", 1, 0, "default", "auto");
}

const struct spec_form spec_form_header = {parse_header, dump_header, schema_header};

/* A column in data.label or data.features: an index, or a name (1 to SPEC_MAX_COLUMN_NAME bytes). */
static bool column_ok(const json_t *v)
{
    if (json_is_integer(v))
        return json_integer_value(v) >= 0 && json_integer_value(v) <= SPEC_MAX_COLUMN;
    return json_is_string(v) && json_string_length(v) >= 1 && json_string_length(v) <= SPEC_MAX_COLUMN_NAME &&
           strlen(json_string_value(v)) == json_string_length(v);
}

static json_t *column_json(const char *name, int index)
{
    return name ? json_string(name) : json_integer(index);
}

static int parse_label(const struct spec_field *f, const json_t *obj, const json_t *v, struct job_spec *s,
                       struct spec_error *se)
{
    (void)obj;
    if (!v)
        return 0;
    if (!column_ok(v))
        return spec_fail(se, "", f->path, "must be a column index 0..%d or a column name", SPEC_MAX_COLUMN);
    if (json_is_integer(v))
        s->data.label = (int)json_integer_value(v);
    else if (!(s->data.label_name = strdup(json_string_value(v))))
        return spec_fail(se, "", f->path, "out of memory");
    return 0;
}

static json_t *dump_label(const struct job_spec *s, bool *failed)
{
    return made(column_json(s->data.label_name, s->data.label), failed);
}

/* column_ok's columns: an index, or a name of 1 to SPEC_MAX_COLUMN_NAME bytes (maxLength counts
 * characters, so a name of many-byte characters may pass it and still be refused). */
static json_t *column_schema(void)
{
    return json_pack("{s:[{s:s, s:i, s:i}, {s:s, s:i, s:i}]}", "anyOf", "type", "integer", "minimum", 0, "maximum",
                     SPEC_MAX_COLUMN, "type", "string", "minLength", 1, "maxLength", SPEC_MAX_COLUMN_NAME);
}

static json_t *schema_label(const struct spec_field *f, json_t *object)
{
    (void)f;
    (void)object;
    json_t *o = column_schema();
    if (o)
        json_object_set_new(o, "default", json_integer(0));
    return o;
}

const struct spec_form spec_form_label = {parse_label, dump_label, schema_label};

/* "rest", or a list of column names and indices: one block holds the list and its names. */
static int parse_features(const struct spec_field *f, const json_t *obj, const json_t *v, struct job_spec *s,
                          struct spec_error *se)
{
    (void)obj;
    if (!v || (json_is_string(v) && strcmp(json_string_value(v), "rest") == 0))
        return 0;
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n == 0 || n > SPEC_MAX_FEATURES)
        return spec_fail(se, "", f->path, "must be \"rest\" or a list of 1 to %d column names or indices",
                         SPEC_MAX_FEATURES);
    size_t bytes = n * sizeof *s->data.features;
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(v, i);
        if (!column_ok(c))
            return spec_fail(se, "", f->path, "item %zu must be a column index 0..%d or a column name", i,
                             SPEC_MAX_COLUMN);
        bytes += json_is_string(c) ? json_string_length(c) + 1 : 0;
    }
    struct dataset_column *cols = malloc(bytes);
    if (!cols)
        return spec_fail(se, "", f->path, "out of memory");
    char *names = (char *)(cols + n);
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(v, i);
        cols[i] = (struct dataset_column){NULL, json_is_integer(c) ? (int)json_integer_value(c) : 0};
        if (json_is_string(c)) {
            size_t len = json_string_length(c) + 1;
            cols[i].name = memcpy(names, json_string_value(c), len);
            names += len;
        }
    }
    s->data.features = cols;
    s->data.n_features = n;
    return 0;
}

static json_t *dump_features(const struct job_spec *s, bool *failed)
{
    if (!s->data.features)
        return made(json_string("rest"), failed);
    json_t *a = json_array();
    for (size_t i = 0; a && i < s->data.n_features; i++)
        if (json_array_append_new(a, column_json(s->data.features[i].name, s->data.features[i].index))) {
            json_decref(a);
            a = NULL;
        }
    return made(a, failed);
}

static json_t *schema_features(const struct spec_field *f, json_t *object)
{
    (void)f;
    (void)object;
    return json_pack("{s:[{s:s}, {s:s, s:o*, s:i, s:i}], s:s}", "anyOf", "const", "rest", "type", "array", "items",
                     column_schema(), "minItems", 1, "maxItems", SPEC_MAX_FEATURES, "default", "rest");
}

const struct spec_form spec_form_features = {parse_features, dump_features, schema_features};

/* optimizer.type: the optimizer's fields start at its defaults, which the fields after it override. */
static int parse_optimizer_type(const struct spec_field *f, const json_t *obj, const json_t *v,
                                struct job_spec *s, struct spec_error *se)
{
    (void)v;
    int kind;
    if (read_word(f, obj, "sgd", &kind, se))
        return -1;
    s->optimizer = optim_defaults[kind];
    return 0;
}

static json_t *dump_optimizer_type(const struct job_spec *s, bool *failed)
{
    return made(json_string(spec_field_find("optimizer.type")->words[s->optimizer.kind]), failed);
}

static json_t *schema_optimizer_type(const struct spec_field *f, json_t *object)
{
    (void)object;
    json_t *o = words_schema(f);
    if (o)
        json_object_set_new(o, "default", json_string(f->words[OPTIM_SGD]));
    return o;
}

const struct spec_form spec_form_optimizer_type = {parse_optimizer_type, dump_optimizer_type,
                                                   schema_optimizer_type};

/* betas: [beta1, beta2], each in [0, 1). */
static int parse_betas(const struct spec_field *f, const json_t *obj, const json_t *v, struct job_spec *s,
                       struct spec_error *se)
{
    (void)f;
    (void)obj;
    if (!v)
        return 0;
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
        !json_is_number(json_array_get(v, 1)))
        return spec_fail(se, "optimizer", "betas", "must be an array of two numbers, like [0.9, 0.999]");
    double x = json_number_value(json_array_get(v, 0)), y = json_number_value(json_array_get(v, 1));
    if (!(x >= 0 && x < 1) || !(y >= 0 && y < 1))
        return spec_fail(se, "optimizer", "betas", "each beta must be at least 0 and below 1");
    s->optimizer.beta1 = x;
    s->optimizer.beta2 = y;
    return 0;
}

static json_t *dump_betas(const struct job_spec *s, bool *failed)
{
    return made(json_pack("[f, f]", s->optimizer.beta1, s->optimizer.beta2), failed);
}

static json_t *schema_betas(const struct spec_field *f, json_t *object)
{
    (void)f;
    (void)object;
    return json_pack("{s:s, s:{s:s, s:f, s:f}, s:i, s:i, s:[f, f]}", "type", "array", "items", "type", "number",
                     "minimum", 0.0, "exclusiveMaximum", 1.0, "minItems", 2, "maxItems", 2, "default",
                     optim_defaults[OPTIM_ADAM].beta1, optim_defaults[OPTIM_ADAM].beta2);
}

const struct spec_form spec_form_betas = {parse_betas, dump_betas, schema_betas};

/* init: "kaiming_uniform", "default", or {"from": ...} (init.from's row reads it). */
static int parse_init(const struct spec_field *f, const json_t *obj, const json_t *v, struct job_spec *s,
                      struct spec_error *se)
{
    /* The DC-taxi baseline's kaiming_uniform_ for its linear model; PyTorch's own nn.Linear
     * init for networks, as a PyTorch user building nn.Sequential gets. */
    s->init = s->model == SPEC_MODEL_LINEAR ? NN_INIT_KAIMING_UNIFORM : NN_INIT_DEFAULT;
    if (json_is_object(v))
        return spec_check_known(v, f->path, se);
    int kind;
    if (v && read_word(f, obj, NULL, &kind, se))
        return -1;
    if (v)
        s->init = (enum nn_init_kind)kind;
    return 0;
}

static json_t *dump_init(const struct job_spec *s, bool *failed)
{
    return made(s->init_from ? json_pack("{s:s}", "from", s->init_from)
                             : json_string(spec_field_find("init")->words[s->init]), failed);
}

/* A word, or the object of init's own rows ({"from": ...}). No default: it follows the model. */
static json_t *schema_init(const struct spec_field *f, json_t *object)
{
    return json_pack("{s:[o*, o*]}", "anyOf", words_schema(f), object);
}

const struct spec_form spec_form_init = {parse_init, dump_init, schema_init};

static int parse_device(const struct spec_field *f, const json_t *obj, const json_t *v, struct job_spec *s,
                        struct spec_error *se)
{
    (void)f;
    (void)v;
    int device = SPEC_DEVICE_AUTO;
    if (spec_parse_device(obj, s, &device, se))
        return -1;
    s->device = (enum spec_device)device;
    return 0;
}

static json_t *dump_device(const struct job_spec *s, bool *failed)
{
    return made(spec_device_json(s), failed);
}

/* parse_device_name's names: "cuda:N" with N 0..63 in decimal without leading zeros. */
_Static_assert(SPEC_MAX_CUDA_INDEX == 63, "the device patterns below spell N 0..63");
#define CUDA_N "cuda:([0-9]|[1-5][0-9]|6[0-3])"

static json_t *schema_device(const struct spec_field *f, json_t *object)
{
    (void)f;
    (void)object;
    return json_pack("{s:[{s:s, s:s}, {s:s, s:{s:s, s:s}, s:i, s:i, s:b}], s:s}", "anyOf",
                     "type", "string", "pattern", "^(auto|cpu|" CUDA_N ")$",
                     "type", "array", "items", "type", "string", "pattern", "^(cpu|" CUDA_N ")$", "minItems", 1,
                     "maxItems", SPEC_MAX_DEVICES, "uniqueItems", 1, "default", "auto");
}

const struct spec_form spec_form_device = {parse_device, dump_device, schema_device};

int spec_check_loss(const struct job_spec *s, struct spec_error *se)
{
    if (s->loss == NN_LOSS_CROSS_ENTROPY && s->model == SPEC_MODEL_LINEAR)
        return spec_fail(se, "", "loss", "cross_entropy needs one output per class: use an \"mlp\" or "
                         "\"layers\" model");
    return 0;
}

int spec_check_nesterov(const struct job_spec *s, struct spec_error *se)
{
    if (s->optimizer.nesterov && s->optimizer.momentum == 0.0)
        return spec_fail(se, "optimizer", "nesterov", "needs momentum > 0, as in torch.optim.SGD");
    return 0;
}

/* iterations or epochs, exactly one (null counts as left out). */
int spec_check_length(const struct job_spec *s, struct spec_error *se)
{
    if (s->iterations && s->epochs)
        return spec_fail(se, "", "epochs", "give iterations or epochs, not both");
    if (!s->iterations && !s->epochs)
        return spec_fail(se, "", "iterations", "is required (or epochs): how long to train");
    return 0;
}

int spec_check_eval_every(const struct job_spec *s, struct spec_error *se)
{
    if (s->eval_every > 0 && !s->data.test)
        return spec_fail(se, "", "eval_every", "needs data.test: the URL or path of the CSV partitions "
                         "to evaluate on");
    return 0;
}

/*
 * A job's replicas run on one kind of device, one a replica: CPU workers, or GPUs summing
 * their gradients with NCCL. "auto" takes GPUs where traind has them (daemon/sched_place.c).
 */
int spec_check_replicas(const struct job_spec *s, struct spec_error *se)
{
    if (s->replicas <= 1)
        return 0;
    if (s->device == SPEC_DEVICE_CUDA)
        return spec_fail(se, "", "replicas", "%d replicas need as many devices, and \"cuda:%d\" names "
                         "one: write \"device\": \"auto\", or a list of GPUs", s->replicas,
                         s->device_index);
    bool cpu = false, gpu = false;
    for (int i = 0; s->device == SPEC_DEVICE_LIST && i < s->n_devices; i++) {
        if (s->devices[i].kind == SPEC_DEVICE_CPU)
            cpu = true;
        else
            gpu = true;
    }
    if (cpu && gpu)
        return spec_fail(se, "", "replicas", "a job's replicas run on one kind of device: list only "
                         "GPUs (\"cuda:N\"), or write \"cpu\"");
    return 0;
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
int spec_check_init_from(const struct job_spec *s, struct spec_error *se)
{
    const char *v = s->init_from;
    if (!v || is_job_id(v))
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
