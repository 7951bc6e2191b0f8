/*
 * test_spec_roundtrip.c — every stored spec loads again: thousands of valid specs, made by a
 * generator written from the documented field list (not from the schema table), each parsed,
 * dumped as the database stores it, and parsed again to an equal spec and the same bytes.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"

#define N_SPECS 5000
#define STORE_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(17) | JSON_PRESERVE_ORDER)

/* splitmix64: the same specs on every run. */
static uint64_t next(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t between(uint64_t *st, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(next(st) % (uint64_t)(hi - lo + 1));
}

static bool coin(uint64_t *st)
{
    return next(st) & 1;
}

/* A number in [lo, hi] (> lo when open): often one that prints awkwardly, sometimes an integer. */
static json_t *real_in(uint64_t *st, double lo, bool open, double hi)
{
    static const double awkward[] = {0.1, 1e-300, 3.0000000000000004, 0.03, 1e-8, 0.999999, 5e-324,
                                     2.2250738585072014e-308, 0.3, 1.0 / 3.0, 0.9, 0.999, 1e6, 1e12,
                                     0.0, 1.0, 0.5, 123456.789, 1e-3, 0.1 + 0.2};
    for (int tries = 0; tries < 8; tries++) {
        double v;
        int pick = (int)between(st, 0, 3);
        if (pick == 0)
            v = awkward[between(st, 0, sizeof awkward / sizeof awkward[0] - 1)];
        else if (pick == 1)
            v = ldexp((double)(next(st) >> 11), (int)between(st, -1100, 0) - 53) ;
        else if (pick == 2)
            v = lo + (hi - lo) * ((double)(next(st) >> 11) / 9007199254740992.0);
        else
            v = (double)between(st, 0, 1000);
        if (v > hi || v < lo || (open && v == lo))
            continue;
        if (v == floor(v) && v < 1e15 && coin(st))
            return json_integer((json_int_t)v);
        return json_real(v);
    }
    return json_real(hi);
}

/* "d/part*.csv", "s3://b/..." and friends, sometimes with characters JSON must escape. */
static json_t *url(uint64_t *st, const char *stem)
{
    static const char *const schemes[] = {"", "file:///srv/", "s3://bucket/", "https://h.example/"};
    static const char *const odd[] = {"", " ", "\"", "\\", "é", "\t", "%20", "ü/"};
    char text[160];
    snprintf(text, sizeof text, "%s%s%s%lld/part*.csv", schemes[between(st, 0, 3)], stem,
             odd[between(st, 0, 7)], (long long)between(st, 0, 999));
    return json_string(text);
}

static void maybe(json_t *o, const char *key, json_t *v, uint64_t *st)
{
    if (coin(st))
        json_object_set_new(o, key, v);
    else
        json_decref(v);
}

static json_t *shuffle(uint64_t *st)
{
    if (between(st, 0, 3) == 0)
        return json_null();
    json_t *sh = json_object();
    maybe(sh, "partitions", json_boolean(coin(st)), st);
    maybe(sh, "buffer", json_integer(between(st, 0, INT64_C(1) << 26)), st);
    return sh;
}

static json_t *data(uint64_t *st, bool *has_test)
{
    static const char *const headers[] = {"auto", "true", "false"};
    static const char *const formats[] = {"auto", "csv", "parquet"};
    json_t *d = json_object();
    json_object_set_new(d, "train", url(st, "train"));
    int test = (int)between(st, 0, 2);   /* absent, null, a URL */
    *has_test = test == 2;
    if (test)
        json_object_set_new(d, "test", test == 2 ? url(st, "test") : json_null());
    maybe(d, "shards", coin(st) ? url(st, ".meta/shards/") : json_null(), st);
    maybe(d, "format", json_string(formats[between(st, 0, 2)]), st);
    const char *h = headers[between(st, 0, 2)];
    maybe(d, "header", h[0] == 'a' ? json_string(h) : json_boolean(h[0] == 't'), st);
    static const char *const names[] = {"fare", "miles", "x0", "a column"};
    maybe(d, "label", coin(st) ? json_integer(between(st, 0, 65535)) : json_string(names[between(st, 0, 3)]), st);
    json_t *features = json_array();
    for (int i = 0, n = (int)between(st, 1, 4); i < n; i++)
        json_array_append_new(features, coin(st) ? json_integer(between(st, 0, 65535))
                                                 : json_string(names[between(st, 0, 3)]));
    if (coin(st)) {
        json_decref(features);
        features = json_string("rest");
    }
    maybe(d, "features", features, st);
    maybe(d, "drop_last", json_boolean(coin(st)), st);
    maybe(d, "shuffle", shuffle(st), st);
    maybe(d, "endpoint", coin(st) ? json_string("http://127.0.0.1:9000") : json_null(), st);
    maybe(d, "region", coin(st) ? json_string("eu-west-1") : json_null(), st);
    maybe(d, "anonymous", json_boolean(coin(st)), st);
    return d;
}

static json_t *mlp(uint64_t *st)
{
    static const char *const acts[] = {"relu", "sigmoid", "tanh"};
    json_t *hidden = json_array();
    for (int64_t i = between(st, 1, 31); i > 0; i--)
        json_array_append_new(hidden, json_integer(between(st, 1, 65536)));
    json_t *m = json_pack("{s:s, s:o}", "type", "mlp", "hidden", hidden);
    maybe(m, "activation", json_string(acts[between(st, 0, 2)]), st);
    int outputs = (int)between(st, 0, 2);   /* absent (the user's case), null (stored by old builds), N */
    if (outputs)
        json_object_set_new(m, "outputs", outputs == 2 ? json_integer(between(st, 1, 65536)) : json_null());
    return m;
}

static json_t *layers(uint64_t *st)
{
    static const char *const acts[] = {"relu", "sigmoid", "tanh", "softmax"};
    json_t *l = json_array();
    int64_t n = between(st, 1, 32), linear_at = between(st, 0, n - 1);
    for (int64_t i = 0; i < n; i++) {
        if (i == linear_at || coin(st))
            json_array_append_new(l, json_pack("{s:I}", "linear", (json_int_t)between(st, 1, 65536)));
        else
            json_array_append_new(l, json_pack("{s:{}}", acts[between(st, 0, 3)]));
    }
    json_t *m = json_pack("{s:o}", "layers", l);
    maybe(m, "type", json_string("layers"), st);
    return m;
}

/* The model; *linear says whether it is the linear one (cross_entropy needs another). */
static json_t *model(uint64_t *st, bool *linear)
{
    int kind = (int)between(st, 0, 3);
    *linear = kind <= 1;
    if (kind == 0)
        return coin(st) ? json_pack("{s:s}", "type", "linear") : json_object();
    return kind == 2 ? mlp(st) : layers(st);
}

static json_t *optimizer(uint64_t *st)
{
    static const char *const types[] = {"sgd", "adam", "adamw"};
    int t = (int)between(st, 0, 3);   /* 3: type left out, sgd */
    json_t *o = json_object();
    if (t < 3)
        json_object_set_new(o, "type", json_string(types[t]));
    maybe(o, "lr", real_in(st, 0, true, 1e6), st);
    maybe(o, "weight_decay", real_in(st, 0, false, 1e6), st);
    if (t == 0 || t == 3) {
        json_t *m = real_in(st, 0, false, 0.999999);
        bool moves = json_number_value(m) > 0;
        maybe(o, "momentum", m, st);
        if (json_object_get(o, "momentum") && moves)
            maybe(o, "nesterov", json_boolean(coin(st)), st);
        else
            maybe(o, "nesterov", json_false(), st);
    } else {
        json_t *b1 = real_in(st, 0, false, 0.9999999999999999), *b2 = real_in(st, 0, false, 0.9999999999999999);
        maybe(o, "betas", json_pack("[o, o]", b1, b2), st);
        maybe(o, "eps", real_in(st, 0, true, 1), st);
    }
    return o;
}

static json_t *device(uint64_t *st)
{
    int form = (int)between(st, 0, 3);
    if (form < 3) {
        char name[16];
        snprintf(name, sizeof name, "cuda:%lld", (long long)between(st, 0, 63));
        return json_string(form == 0 ? "auto" : form == 1 ? "cpu" : name);
    }
    bool used[65] = {false};
    json_t *list = json_array();
    for (int64_t n = between(st, 1, 8); n > 0; n--) {
        int k = (int)between(st, 0, 64);   /* 64: the CPU */
        if (used[k])
            continue;
        used[k] = true;
        char name[16];
        snprintf(name, sizeof name, "cuda:%d", k);
        json_array_append_new(list, json_string(k == 64 ? "cpu" : name));
    }
    return list;
}

static json_t *init(uint64_t *st)
{
    static const char *const from[] = {"0123456789abcdef", "s3://b/m/final.safetensors", "m/w.safetensors",
                                       "https://h/w.safetensors?v=2", "file:///srv/m.safetensors"};
    int form = (int)between(st, 0, 2);
    if (form < 2)
        return json_string(form ? "default" : "kaiming_uniform");
    return json_pack("{s:s}", "from", from[between(st, 0, 4)]);
}

/* A valid job spec, every field present or not at random. */
static json_t *generate(uint64_t *st)
{
    static const char *const losses[] = {"mse", "bce", "cross_entropy"};
    json_t *s = json_object();
    bool has_test, linear;
    maybe(s, "name", coin(st) ? json_string("dc-taxi \"baseline\" ☃") : json_null(), st);
    maybe(s, "client_id", coin(st) ? json_string("k-1") : json_null(), st);
    maybe(s, "priority", json_integer(between(st, -1000, 1000)), st);
    json_object_set_new(s, "data", data(st, &has_test));
    json_t *m = model(st, &linear);
    if (!linear || coin(st))
        json_object_set_new(s, "model", m);
    else
        json_decref(m);
    maybe(s, "loss", json_string(losses[between(st, 0, linear ? 1 : 2)]), st);
    maybe(s, "optimizer", optimizer(st), st);
    maybe(s, "clip_grad_norm", coin(st) ? real_in(st, 0, true, 1e12) : json_null(), st);
    maybe(s, "batch_size", json_integer(between(st, 1, INT64_C(1) << 26)), st);
    bool epochs = coin(st);
    json_object_set_new(s, epochs ? "epochs" : "iterations",
                        json_integer(epochs ? between(st, 1, 1000000) : between(st, 1, 1000000000)));
    maybe(s, epochs ? "iterations" : "epochs", json_null(), st);
    maybe(s, "dtype", json_string(coin(st) ? "float32" : "float64"), st);
    maybe(s, "device", device(st), st);
    const json_t *dv = json_object_get(s, "device");
    bool on_cpu = json_is_string(dv) && strcmp(json_string_value(dv), "cpu") == 0;
    maybe(s, "replicas", json_integer(on_cpu ? between(st, 1, 64) : 1), st);
    maybe(s, "seed", json_integer(coin(st) ? between(st, 0, 1000) : (int64_t)(next(st) >> 1)), st);
    maybe(s, "init", init(st), st);
    maybe(s, "eval_every", json_integer(has_test ? between(st, 0, 1000000000) : 0), st);
    maybe(s, "checkpoint_every", json_integer(between(st, 0, 1000000000)), st);
    return s;
}

static bool same_string(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

#define DIFF(cond, what) do { if (!(cond)) return what; } while (0)

static const char *data_differs(const struct job_spec *a, const struct job_spec *b)
{
    DIFF(same_string(a->data.train, b->data.train), "data.train");
    DIFF(same_string(a->data.test, b->data.test), "data.test");
    DIFF(same_string(a->data.shards, b->data.shards), "data.shards");
    DIFF(a->data.header == b->data.header, "data.header");
    DIFF(a->data.label == b->data.label, "data.label");
    DIFF(a->data.drop_last == b->data.drop_last, "data.drop_last");
    DIFF(a->data.shuffle_partitions == b->data.shuffle_partitions, "data.shuffle.partitions");
    DIFF(a->data.shuffle_buffer == b->data.shuffle_buffer, "data.shuffle.buffer");
    DIFF(same_string(a->data.endpoint, b->data.endpoint), "data.endpoint");
    DIFF(same_string(a->data.region, b->data.region), "data.region");
    DIFF(a->data.anonymous == b->data.anonymous, "data.anonymous");
    return NULL;
}

static const char *model_differs(const struct job_spec *a, const struct job_spec *b)
{
    DIFF(a->model == b->model, "model.type");
    DIFF(a->net.n_hidden == b->net.n_hidden, "model.hidden");
    for (int i = 0; i < a->net.n_hidden; i++)
        DIFF(a->net.hidden[i] == b->net.hidden[i], "model.hidden[i]");
    DIFF(a->model != SPEC_MODEL_MLP || a->net.activation == b->net.activation, "model.activation");
    DIFF(a->net.outputs == b->net.outputs, "model.outputs");
    DIFF(a->net.n_layers == b->net.n_layers, "model.layers");
    for (int i = 0; i < a->net.n_layers; i++)
        DIFF(a->net.layers[i].kind == b->net.layers[i].kind &&
             a->net.layers[i].out_features == b->net.layers[i].out_features, "model.layers[i]");
    return NULL;
}

static const char *optimizer_differs(const struct optim_config *a, const struct optim_config *b)
{
    DIFF(a->kind == b->kind, "optimizer.type");
    DIFF(a->lr == b->lr, "optimizer.lr");
    DIFF(a->weight_decay == b->weight_decay, "optimizer.weight_decay");
    DIFF(a->momentum == b->momentum, "optimizer.momentum");
    DIFF(a->nesterov == b->nesterov, "optimizer.nesterov");
    DIFF(a->beta1 == b->beta1 && a->beta2 == b->beta2, "optimizer.betas");
    DIFF(a->eps == b->eps, "optimizer.eps");
    return NULL;
}

/* The first field in which a and b differ, or NULL when they are the same spec. */
static const char *spec_differs(const struct job_spec *a, const struct job_spec *b)
{
    const char *d;
    DIFF(same_string(a->name, b->name), "name");
    DIFF(same_string(a->client_id, b->client_id), "client_id");
    DIFF(a->priority == b->priority, "priority");
    if ((d = data_differs(a, b)) || (d = model_differs(a, b)) || (d = optimizer_differs(&a->optimizer, &b->optimizer)))
        return d;
    DIFF(a->loss == b->loss, "loss");
    DIFF(a->clip_grad_norm == b->clip_grad_norm, "clip_grad_norm");
    DIFF(a->batch_size == b->batch_size, "batch_size");
    DIFF(a->iterations == b->iterations, "iterations");
    DIFF(a->epochs == b->epochs, "epochs");
    DIFF(a->dtype == b->dtype, "dtype");
    DIFF(a->device == b->device && a->device_index == b->device_index, "device");
    DIFF(a->n_devices == b->n_devices, "device (list)");
    for (int i = 0; i < a->n_devices; i++)
        DIFF(a->devices[i].kind == b->devices[i].kind && a->devices[i].index == b->devices[i].index, "device[i]");
    DIFF(a->replicas == b->replicas, "replicas");
    DIFF(a->seed == b->seed, "seed");
    DIFF(a->init == b->init, "init");
    DIFF(same_string(a->init_from, b->init_from), "init.from");
    DIFF(a->checkpoint_every == b->checkpoint_every, "checkpoint_every");
    DIFF(a->eval_every == b->eval_every, "eval_every");
    return NULL;
}

/* The spec as the database stores it: spec_to_json's text. */
static char *stored(const struct job_spec *s)
{
    json_t *j = spec_to_json(s);
    cr_assert_not_null(j);
    char *text = json_dumps(j, STORE_FLAGS);
    json_decref(j);
    cr_assert_not_null(text);
    return text;
}

/* What a restart does: the stored text parsed again. */
static struct job_spec *reload(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    cr_assert_not_null(j, "stored spec is not JSON: %s\n%s", je.text, text);
    struct job_spec *s;
    struct spec_error se;
    int rc = spec_parse(j, &s, &se);
    json_decref(j);
    cr_assert_eq(rc, 0, "a stored spec does not load: %s: %s\n%s", se.field, se.message, text);
    return s;
}

/* parse(x) works; parse(dump(parse(x))) equals it; dump(parse(dump(parse(x)))) is dump(parse(x)). */
static void check_round_trip(const json_t *x, int i)
{
    struct job_spec *first;
    struct spec_error se;
    char *given = json_dumps(x, STORE_FLAGS);
    cr_assert_eq(spec_parse(x, &first, &se), 0, "spec %d refused: %s: %s\n%s", i, se.field, se.message, given);
    char *once = stored(first);
    struct job_spec *again = reload(once);
    const char *d = spec_differs(first, again);
    cr_assert_null(d, "spec %d: %s changed through the store\n%s\n%s", i, d, given, once);
    char *twice = stored(again);
    cr_assert_str_eq(twice, once, "spec %d: the dump is not a fixed point\n%s", i, given);
    free(given);
    free(once);
    free(twice);
    spec_free(first);
    spec_free(again);
}

Test(spec_roundtrip, thousands_of_generated_specs_load_again_unchanged)
{
    uint64_t st = 20240601;
    for (int i = 0; i < N_SPECS; i++) {
        json_t *x = generate(&st);
        check_round_trip(x, i);
        json_decref(x);
    }
}

/* What a prediction off the loop thread holds: a copy that is still whole once the job's spec is freed. */
Test(spec_roundtrip, a_dup_equals_the_spec_and_outlives_it)
{
    uint64_t st = 20261125;
    for (int i = 0; i < N_SPECS / 10; i++) {
        json_t *x = generate(&st);
        struct job_spec *s, *dup;
        struct spec_error se;
        cr_assert_eq(spec_parse(x, &s, &se), 0, "spec %d refused: %s: %s", i, se.field, se.message);
        cr_assert_not_null(dup = spec_dup(s, &se), "spec %d: %s: %s", i, se.field, se.message);
        cr_assert_neq(dup, s);
        cr_assert_null(spec_differs(s, dup), "spec %d: %s differs in the copy", i, spec_differs(s, dup));
        char *before = stored(s);
        spec_free(s);
        char *after = stored(dup);
        cr_assert_str_eq(after, before, "spec %d", i);
        free(before);
        free(after);
        spec_free(dup);
        json_decref(x);
    }
}

/* docs/api.md's MLP, without "outputs": stored, then read back after a restart. */
Test(spec_roundtrip, the_documented_mlp_without_outputs_survives_a_restart)
{
    json_error_t je;
    json_t *x = json_loads("{\"data\":{\"train\":\"file:///srv/data/dc-taxi/csv/dev/part*.csv\"},"
                           "\"model\":{\"type\":\"mlp\",\"hidden\":[256,256],\"activation\":\"relu\"},"
                           "\"loss\":\"mse\",\"iterations\":50}", 0, &je);
    cr_assert_not_null(x, "%s", je.text);
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(spec_parse(x, &s, &se), 0, "%s: %s", se.field, se.message);
    char *text = stored(s);
    cr_expect_null(strstr(text, "\"outputs\""), "outputs come from the data, so the store leaves them out: %s", text);
    struct job_spec *again = reload(text);
    cr_expect_eq(again->model, SPEC_MODEL_MLP);
    cr_expect_eq(again->net.outputs, 0);
    cr_expect_null(spec_differs(s, again));
    free(text);
    spec_free(s);
    spec_free(again);
    json_decref(x);
}

/* Builds before the schema table stored "outputs": null; those rows load too. */
Test(spec_roundtrip, a_row_stored_with_outputs_null_still_loads)
{
    struct job_spec *s = reload("{\"data\":{\"train\":\"d.csv\"},\"model\":{\"type\":\"mlp\",\"hidden\":[8],"
                                "\"activation\":\"relu\",\"outputs\":null},\"iterations\":5,\"epochs\":null}");
    cr_expect_eq(s->net.outputs, 0);
    spec_free(s);
}
