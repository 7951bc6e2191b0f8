/*
 * test_matrix.c — every model form the job spec accepts, with every loss that applies to it, through
 * every stage of a job's life on the real daemon: training with an evaluation on data.test, predict,
 * the checkpoint's PyTorch state_dict names, init.from by job id and by file URL, pause and resume,
 * a SIGTERM restart, delete.
 *
 * The forms come from the spec's schema table (train/spec_schema.c: the model types, each enum and
 * derived field a type takes) and core's layer kinds; the losses from the table's "loss" row, and
 * spec_parse says which loss applies to which form. A new activation, layer kind or loss joins the
 * matrix by itself; a new model type fails here until it is given a form.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"
#include "nn.h"
#include "spec.h"
#include "spec_schema.h"

#define MAX_CASES 96
#define MAX_LAYERS 4
#define CLASSES 3           /* the classifier data's labels are 0, 1, 2 */
#define FEATURES 2
#define HIDDEN 4
#define WAVE 8              /* long jobs at once, one CPU worker each */

static struct daemon_proc D;
static const char *const workers[] = {"--cpu-workers", "8", "--gpus", "none", NULL};

/* One cell of the matrix: a model form with a loss. */
struct mcase {
    char name[96];                  /* "mlp activation=tanh, cross_entropy" */
    char model[320];                /* the spec's "model" object */
    char loss[32];
    int outputs;                    /* what the model gives a row */
    bool linear_model;              /* w (features x 1), b (1 x 1) rather than Sequential's names */
    int n_layers;
    struct nn_layer_spec layers[MAX_LAYERS];
};

static struct mcase cases[MAX_CASES];
static int n_cases;

/* A model form before its loss: the JSON with "%d" where the output width goes (or none). */
struct form {
    char name[64];
    char model[256];                /* the JSON, or the part before the width ... */
    char model_end[64];             /* ... and the part after it */
    bool takes_width, linear_model;
    int n_layers;
    struct nn_layer_spec layers[MAX_LAYERS];
};

static void hidden_stack(struct form *f, enum nn_layer_kind act)
{
    f->n_layers = 3;
    f->layers[0] = (struct nn_layer_spec){NN_LAYER_LINEAR, HIDDEN};
    f->layers[1] = (struct nn_layer_spec){act, 0};
    f->layers[2] = (struct nn_layer_spec){NN_LAYER_LINEAR, 0};   /* the width, set per loss */
}

/* Every form the schema's model types take: each enum word and each derived field of the type. */
static int forms_from_schema(struct form *out, int cap)
{
    const struct spec_field *type = spec_field_find("model.type");
    cr_assert_not_null(type);
    int n = 0;
    for (int m = 0; m < type->n_words; m++) {
        if (!type->words[m])
            continue;
        unsigned bit = 1u << m;
        if (m == SPEC_MODEL_LINEAR) {
            cr_assert_lt(n, cap);
            out[n++] = (struct form){.name = "linear", .model = "{\"type\":\"linear\"}", .linear_model = true};
        } else if (m == SPEC_MODEL_MLP) {
            for (size_t i = 0; i < spec_n_fields; i++) {
                const struct spec_field *f = &spec_fields[i];
                if (!(f->models & bit))
                    continue;
                if (f->type == SPEC_T_ENUM && strcmp(f->path, "model.activation") == 0) {
                    for (int w = 0; w < f->n_words; w++) {
                        enum nn_layer_kind k;
                        if (!f->words[w] || nn_layer_kind_parse(f->words[w], &k))
                            continue;
                        cr_assert_lt(n, cap);
                        struct form *fm = &out[n++];
                        *fm = (struct form){0};
                        snprintf(fm->name, sizeof fm->name, "mlp %s=%s", spec_field_key(f), f->words[w]);
                        snprintf(fm->model, sizeof fm->model,
                                 "{\"type\":\"mlp\",\"hidden\":[%d],\"%s\":\"%s\"}", HIDDEN, spec_field_key(f),
                                 f->words[w]);
                        hidden_stack(fm, k);
                    }
                } else if (f->type == SPEC_T_ENUM) {
                    cr_assert_fail("%s: an mlp field the matrix does not vary yet", f->path);
                } else if (f->flags & SPEC_F_DERIVED) {
                    cr_assert_lt(n, cap);
                    struct form *fm = &out[n++];
                    *fm = (struct form){.takes_width = true};
                    snprintf(fm->name, sizeof fm->name, "mlp %s set", spec_field_key(f));
                    snprintf(fm->model, sizeof fm->model, "{\"type\":\"mlp\",\"hidden\":[%d],\"%s\":",
                             HIDDEN, spec_field_key(f));
                    snprintf(fm->model_end, sizeof fm->model_end, "}");
                    hidden_stack(fm, NN_LAYER_RELU);
                }
            }
        } else if (m == SPEC_MODEL_LAYERS) {
            /* Each layer kind core knows between two linear layers; the last one sets the width. */
            for (int k = 0; strcmp(nn_layer_kind_name((enum nn_layer_kind)k), "?") != 0; k++) {
                if (k == NN_LAYER_LINEAR)
                    continue;
                cr_assert_lt(n, cap);
                struct form *fm = &out[n++];
                *fm = (struct form){.takes_width = true};
                const char *kn = nn_layer_kind_name((enum nn_layer_kind)k);
                snprintf(fm->name, sizeof fm->name, "layers %s", kn);
                snprintf(fm->model, sizeof fm->model, "{\"layers\":[{\"linear\":%d},{\"%s\":{}},{\"linear\":", HIDDEN,
                         kn);
                snprintf(fm->model_end, sizeof fm->model_end, "}]}");
                hidden_stack(fm, (enum nn_layer_kind)k);
            }
        } else {
            cr_assert_fail("model type %s has no form in the matrix: add one", type->words[m]);
        }
    }
    return n;
}

/* The job spec of c on the data under D.dir, with more members (",\"x\":1" or ""). */
static const char *case_spec(const struct mcase *c, long long iterations, const char *more)
{
    static char buf[2048];
    const char *data = strcmp(c->loss, "cross_entropy") == 0 ? "cls" : "bin";
    int n = snprintf(buf, sizeof buf,
             "{\"name\":\"%s\",\"data\":{\"train\":\"%s/%s/part*.csv\",\"test\":\"%s/%s-test/part*.csv\"},"
             "\"model\":%s,\"loss\":\"%s\",\"optimizer\":{\"type\":\"adam\",\"lr\":0.01},"
             "\"batch_size\":4,\"iterations\":%lld,\"dtype\":\"float32\",\"seed\":0%s}",
             c->name, D.dir, data, D.dir, data, c->model, c->loss, iterations, more);
    cr_assert(n > 0 && (size_t)n < sizeof buf);
    return buf;
}

/* The matrix: every form with every loss spec_parse takes for it. */
static void build_cases(void)
{
    struct form forms[32];
    int nf = forms_from_schema(forms, 32);
    const struct spec_field *loss = spec_field_find("loss");
    n_cases = 0;
    for (int f = 0; f < nf; f++)
        for (int l = 0; l < loss->n_words; l++) {
            if (!loss->words[l])
                continue;
            cr_assert_lt(n_cases, MAX_CASES);
            struct mcase *c = &cases[n_cases];
            *c = (struct mcase){.linear_model = forms[f].linear_model, .n_layers = forms[f].n_layers};
            int width = strcmp(loss->words[l], "cross_entropy") == 0 ? CLASSES : 1;
            snprintf(c->name, sizeof c->name, "%s, %s", forms[f].name, loss->words[l]);
            snprintf(c->loss, sizeof c->loss, "%s", loss->words[l]);
            if (forms[f].takes_width)
                snprintf(c->model, sizeof c->model, "%s%d%s", forms[f].model, width, forms[f].model_end);
            else
                snprintf(c->model, sizeof c->model, "%s", forms[f].model);
            c->outputs = c->linear_model ? 1 : width;
            memcpy(c->layers, forms[f].layers, sizeof c->layers);
            if (c->n_layers)
                c->layers[c->n_layers - 1].out_features = width;
            json_t *root = json_loads(case_spec(c, 1, ""), 0, NULL);
            cr_assert_not_null(root, "%s", case_spec(c, 1, ""));
            struct job_spec *s;
            struct spec_error se;
            int rc = spec_parse(root, &s, &se);
            json_decref(root);
            if (rc) {   /* a loss this form does not take (cross_entropy of the linear model) */
                cr_assert_str_eq(se.field, "loss", "%s: %s: %s", c->name, se.field, se.message);
                continue;
            }
            spec_free(s);
            n_cases++;
        }
    cr_assert_geq(n_cases, 20, "the matrix has only %d cases", n_cases);
}

/* label,x1,x2 rows; the first batch of the classifier data holds every class. */
static void write_data(void)
{
    char dir[512];
    write_partition(&D, "bin", "0,0.5,1\n1,1.5,-1\n0,-0.5,2\n1,2,0.5\n1,1,1\n0,-1,-1\n1,0.25,0.75\n0,3,-2\n", dir,
                    sizeof dir);
    write_partition(&D, "bin-test", "1,0.1,0.2\n0,-0.3,1\n1,2,2\n", dir, sizeof dir);
    write_partition(&D, "cls", "0,0.5,1\n1,1.5,-1\n2,-0.5,2\n1,2,0.5\n2,1,1\n0,-1,-1\n1,0.25,0.75\n2,3,-2\n", dir,
                    sizeof dir);
    write_partition(&D, "cls-test", "2,0.1,0.2\n0,-0.3,1\n1,2,2\n", dir, sizeof dir);
}

static void setup(void)
{
    memset(&D, 0, sizeof D);
    snprintf(D.dir, sizeof D.dir, "/tmp/traind-it-XXXXXX");
    cr_assert_not_null(mkdtemp(D.dir));
    cr_assert(daemon_spawn(&D, workers), "traind did not start (see its log under %s)", D.dir);
    build_cases();
    write_data();
}

static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(matrix, .init = setup, .fini = teardown, .timeout = 280);

#define SHORT_ITERATIONS 6

/* Every case trained for SHORT_ITERATIONS with an evaluation every 3; each must succeed. */
static void train_all(char ids[][64])
{
    for (int i = 0; i < n_cases; i++)
        submit_job(&D, case_spec(&cases[i], SHORT_ITERATIONS, ",\"eval_every\":3"), ids[i], 64);
    for (int i = 0; i < n_cases; i++) {
        json_t *job = wait_job_done(&D, ids[i], 120);
        cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "%s: %s", cases[i].name,
                         json_string_value(json_object_get(json_object_get(job, "error"), "message")));
        json_decref(job);
    }
}

static char ids[MAX_CASES][64];

Test(matrix, every_form_trains_and_evaluates_on_its_test_set)
{
    train_all(ids);
    for (int i = 0; i < n_cases; i++) {
        char path[160];
        snprintf(path, sizeof path, "/jobs/%s/metrics", ids[i]);
        json_t *m = get_json(&D, path, 200);
        json_t *rows = json_object_get(m, "rows");
        size_t at = metrics_column(m, "eval_loss"), loss = metrics_column(m, "loss");
        cr_expect_eq(json_array_size(rows), SHORT_ITERATIONS, "%s", cases[i].name);
        for (size_t r = 0; r < json_array_size(rows); r++) {
            json_t *row = json_array_get(rows, r);
            cr_expect(isfinite(json_number_value(json_array_get(row, loss))), "%s: loss of row %zu", cases[i].name,
                      r);
            bool evaluated = r % 3 == 2;
            json_t *ev = json_array_get(row, at);
            cr_expect(evaluated ? json_is_number(ev) && isfinite(json_number_value(ev)) : json_is_null(ev),
                      "%s: eval_loss of iteration %zu", cases[i].name, r);
        }
        json_decref(m);
    }
}

Test(matrix, every_forms_model_predicts_a_value_or_a_row_of_logits_per_row)
{
    train_all(ids);
    for (int i = 0; i < n_cases; i++) {
        char path[160];
        struct http_reply r;
        snprintf(path, sizeof path, "/jobs/%s/predict", ids[i]);
        cr_assert(http(&D, "POST", path, "application/json", "{\"rows\":[[0.5,1],[2,-1],[0,0]]}", &r));
        cr_expect_eq(r.status, 200, "%s: %s", cases[i].name, r.body);
        json_t *p = json_object_get(r.json, "predictions");
        cr_expect_eq(json_array_size(p), 3, "%s: %s", cases[i].name, r.body);
        for (size_t k = 0; k < json_array_size(p); k++) {
            json_t *v = json_array_get(p, k);
            if (cases[i].outputs == 1)
                cr_expect(json_is_number(v), "%s: one number a row: %s", cases[i].name, r.body);
            else
                cr_expect(json_is_array(v) && (int)json_array_size(v) == cases[i].outputs,
                          "%s: %d logits a row: %s", cases[i].name, cases[i].outputs, r.body);
        }
        http_reply_free(&r);
    }
}

/* The downloaded checkpoint of job id (its bytes, caller frees) and their count. */
static char *download(const char *id, size_t *len)
{
    char path[160], cl[32];
    struct http_reply r;
    snprintf(path, sizeof path, "/jobs/%s/checkpoint", id);
    cr_assert(http(&D, "GET", path, NULL, NULL, &r));
    cr_assert_eq(r.status, 200, "%s: %s", path, r.body);
    *len = (size_t)strtoull(http_header(&r, "Content-Length", cl, sizeof cl), NULL, 10);
    char *out = malloc(*len);
    cr_assert_not_null(out);
    memcpy(out, r.body, *len);
    http_reply_free(&r);
    return out;
}

/* The state_dict names and shapes torch gives the form: w, b; or i.weight (out, in), i.bias (out). */
static void expect_state_dict(const struct mcase *c, json_t *header)
{
    int expected = 0;
    if (c->linear_model) {
        json_t *w = json_object_get(header, "w"), *b = json_object_get(header, "b");
        cr_expect_eq(json_integer_value(json_array_get(json_object_get(w, "shape"), 0)), FEATURES, "%s: w", c->name);
        cr_expect_eq(json_integer_value(json_array_get(json_object_get(b, "shape"), 0)), 1, "%s: b", c->name);
        expected = 2;
    } else {
        int64_t in = FEATURES;
        for (int l = 0; l < c->n_layers; l++) {
            if (c->layers[l].kind != NN_LAYER_LINEAR)
                continue;
            char wn[32], bn[32];
            snprintf(wn, sizeof wn, "%d.weight", l);
            snprintf(bn, sizeof bn, "%d.bias", l);
            json_t *ws = json_object_get(json_object_get(header, wn), "shape");
            json_t *bs = json_object_get(json_object_get(header, bn), "shape");
            cr_expect(json_integer_value(json_array_get(ws, 0)) == c->layers[l].out_features &&
                      json_integer_value(json_array_get(ws, 1)) == in && json_array_size(ws) == 2,
                      "%s: %s is (%lld, %lld)", c->name, wn, (long long)c->layers[l].out_features, (long long)in);
            cr_expect(json_array_size(bs) == 1 && json_integer_value(json_array_get(bs, 0)) == c->layers[l].out_features,
                      "%s: %s is (%lld)", c->name, bn, (long long)c->layers[l].out_features);
            in = c->layers[l].out_features;
            expected += 2;
        }
    }
    /* Nothing else but the optimizer's state and the metadata. */
    const char *key;
    json_t *v;
    int params = 0;
    json_object_foreach(header, key, v) {
        if (strcmp(key, "__metadata__") != 0 && strncmp(key, "optim.", 6) != 0) {
            params++;
            cr_expect_str_eq(json_string_value(json_object_get(v, "dtype")), "F32", "%s: %s", c->name, key);
        }
    }
    cr_expect_eq(params, expected, "%s: %d tensors besides the optimizer's, not %d", c->name, params, expected);
}

Test(matrix, every_forms_checkpoint_holds_pytorchs_state_dict_names_and_shapes)
{
    train_all(ids);
    for (int i = 0; i < n_cases; i++) {
        size_t len;
        char *body = download(ids[i], &len);
        const char *data;
        json_t *h = safetensors_header(body, len, &data);
        expect_state_dict(&cases[i], h);
        json_t *md = json_object_get(h, "__metadata__");
        char outputs[16];
        snprintf(outputs, sizeof outputs, "%d", cases[i].outputs);
        cr_expect_str_eq(json_string_value(json_object_get(md, "outputs")), outputs, "%s", cases[i].name);
        json_decref(h);
        free(body);
    }
}

/* The loss of job id's first iteration. */
static double first_loss(const char *id)
{
    double loss[2];
    job_losses(&D, id, loss, 2);
    return loss[0];
}

Test(matrix, every_form_starts_from_a_jobs_checkpoint_and_from_a_file)
{
    train_all(ids);
    char by_id[MAX_CASES][64], by_url[MAX_CASES][64];
    char dir[512];
    snprintf(dir, sizeof dir, "%s/from", D.dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
    for (int i = 0; i < n_cases; i++) {
        size_t len;
        char *body = download(ids[i], &len);
        char file[640], member[800];
        snprintf(file, sizeof file, "%s/%d.safetensors", dir, i);
        FILE *f = fopen(file, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(body, 1, len, f), len);
        cr_assert_eq(fclose(f), 0);
        free(body);
        snprintf(member, sizeof member, ",\"init\":{\"from\":\"%s\"}", ids[i]);
        submit_job(&D, case_spec(&cases[i], 2, member), by_id[i], sizeof by_id[i]);
        snprintf(member, sizeof member, ",\"init\":{\"from\":\"file://%s\"}", file);
        submit_job(&D, case_spec(&cases[i], 2, member), by_url[i], sizeof by_url[i]);
    }
    for (int i = 0; i < n_cases; i++) {
        for (int k = 0; k < 2; k++) {
            const char *id = k ? by_url[i] : by_id[i];
            json_t *job = wait_job_done(&D, id, 120);
            cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "%s from %s: %s",
                             cases[i].name, k ? "a file" : "a job",
                             json_string_value(json_object_get(json_object_get(job, "error"), "message")));
            json_decref(job);
        }
        /* The same parameters on the same first batch: the same loss, and not the fresh model's. */
        double a = first_loss(by_id[i]), b = first_loss(by_url[i]);
        double loss[SHORT_ITERATIONS];
        job_losses(&D, ids[i], loss, SHORT_ITERATIONS);
        cr_expect_eq(a, b, "%s: from the job %.9g, from its file %.9g", cases[i].name, a, b);
        cr_expect_neq(a, loss[0], "%s: the start is the trained model, not a fresh one", cases[i].name);
    }
}

static long long progress_of(const char *id, const char *what)
{
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *j = get_json(&D, path, 200);
    long long it = json_integer_value(json_object_get(json_object_get(j, what), "iteration"));
    json_decref(j);
    return it;
}

static void control(const char *id, const char *verb)
{
    char path[128];
    struct http_reply r;
    snprintf(path, sizeof path, "/jobs/%s/%s", id, verb);
    cr_assert(http(&D, "POST", path, NULL, NULL, &r));
    cr_assert_eq(r.status, 202, "%s: %s", path, r.body);
    http_reply_free(&r);
}

/* Cancels long jobs [w, end) once each has done `after` more iterations, then checks their
 * histories: iterations 0 .. n-1, each once, in order. */
static void cancel_and_check(int w, int end, const long long *after)
{
    for (int i = w; i < end; i++) {
        wait_job_iterations(&D, ids[i], after[i - w] + 2);
        control(ids[i], "cancel");
    }
    for (int i = w; i < end; i++) {
        json_t *job = wait_job_done(&D, ids[i], 60);
        cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "cancelled", "%s", cases[i].name);
        long long n = json_integer_value(json_object_get(json_object_get(job, "progress"), "iteration"));
        json_decref(job);
        double *loss = malloc((size_t)n * sizeof *loss);
        cr_assert_not_null(loss);
        job_losses(&D, ids[i], loss, (size_t)n);
        free(loss);
    }
}

#define LONG_ITERATIONS 1000000000LL

Test(matrix, every_form_pauses_at_a_checkpoint_and_resumes_from_it)
{
    for (int w = 0; w < n_cases; w += WAVE) {
        int end = w + WAVE < n_cases ? w + WAVE : n_cases;
        long long at[WAVE];
        for (int i = w; i < end; i++)
            submit_job(&D, case_spec(&cases[i], LONG_ITERATIONS, ""), ids[i], 64);
        for (int i = w; i < end; i++) {
            wait_job_iterations(&D, ids[i], 2);
            control(ids[i], "pause");
        }
        for (int i = w; i < end; i++) {
            wait_job_state(&D, ids[i], "paused", 30);
            at[i - w] = progress_of(ids[i], "progress");
            cr_expect_eq(progress_of(ids[i], "checkpoint"), at[i - w], "%s: the pause checkpointed where it stopped",
                         cases[i].name);
            control(ids[i], "resume");
        }
        cancel_and_check(w, end, at);
    }
}

Test(matrix, every_form_goes_on_after_a_sigterm_restart)
{
    for (int w = 0; w < n_cases; w += WAVE) {
        int end = w + WAVE < n_cases ? w + WAVE : n_cases;
        long long at[WAVE];
        for (int i = w; i < end; i++)
            submit_job(&D, case_spec(&cases[i], LONG_ITERATIONS, ""), ids[i], 64);
        for (int i = w; i < end; i++)
            wait_job_iterations(&D, ids[i], 2);
        cr_assert_eq(daemon_stop(&D, 30), 0, "SIGTERM: traind exits 0");
        cr_assert(daemon_spawn(&D, workers), "traind did not start again");
        for (int i = w; i < end; i++) {
            at[i - w] = progress_of(ids[i], "checkpoint");
            cr_expect_geq(at[i - w], 2, "%s: SIGTERM checkpointed it", cases[i].name);
        }
        cancel_and_check(w, end, at);
    }
}

Test(matrix, every_finished_form_is_deleted_with_its_checkpoints)
{
    train_all(ids);
    for (int i = 0; i < n_cases; i++) {
        char path[160], dir[600];
        struct http_reply r;
        snprintf(path, sizeof path, "/jobs/%s", ids[i]);
        cr_assert(http(&D, "DELETE", path, NULL, NULL, &r));
        cr_expect_eq(r.status, 200, "%s: %s", cases[i].name, r.body);
        cr_expect(json_is_true(json_object_get(r.json, "deleted")), "%s", r.body);
        http_reply_free(&r);
        json_decref(get_json(&D, path, 404));
        char state[300];
        daemon_state_dir(&D, state, sizeof state);
        snprintf(dir, sizeof dir, "%s/checkpoints/%s", state, ids[i]);
        struct stat st;
        double t0 = now_s();
        while (stat(dir, &st) == 0 && now_s() - t0 < 10)
            sleep_ms(20);
        cr_expect_neq(stat(dir, &st), 0, "%s: %s is gone", cases[i].name, dir);
    }
}
