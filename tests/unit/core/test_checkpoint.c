/* test_checkpoint.c — safetensors checkpoints: round trip, bit-identical resume, a file from an
 * independent writer, and corrupted files failing cleanly. */
#include <dirent.h>
#include <unistd.h>

#include "checkpoint.h"
#include "helpers.h"
#include "nn.h"
#include "optim.h"

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/traind-ckpt-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[400];
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

TestSuite(ckpt, .init = make_dir, .fini = remove_dir);

static const char *file(const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* ---- models and one training step of each kind ---- */

static const struct nn_layer_spec NET[] = {
    {NN_LAYER_LINEAR, 16}, {NN_LAYER_RELU, 0}, {NN_LAYER_LINEAR, 3},
};

static struct nn_model *mlp(uint64_t seed)
{
    struct err e = {0};
    struct nn_model *m;
    struct rng r;
    rng_seed(&r, seed);
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F32, 8, NET, 3, &m, &e), 0, "%s", e.msg);
    cr_assert_eq(nn_init(m, NN_INIT_DEFAULT, &r, &e), 0, "%s", e.msg);
    return m;
}

static struct nn_model *linear(uint64_t seed)
{
    struct err e = {0};
    struct nn_model *m;
    struct rng r;
    rng_seed(&r, seed);
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 8, &m, &e), 0, "%s", e.msg);
    cr_assert_eq(nn_init(m, NN_INIT_DEFAULT, &r, &e), 0, "%s", e.msg);
    return m;
}

static struct optim *optimizer(struct nn_model *m, enum optim_kind kind)
{
    struct err e = {0};
    struct optim_config oc;
    struct optim *o;
    optim_config_defaults(&oc, kind);
    if (kind == OPTIM_SGD) {
        oc.lr = 0.01;
        oc.momentum = 0.9;
    }
    cr_assert_eq(optim_create(&oc, m, &o, &e), 0, "%s", e.msg);
    return o;
}

/* A batch (64, 9): label column 0 (a class index 0..2 for the MLP), 8 features. */
static struct tensor *batch(int k, bool classes, enum tensor_dtype dt)
{
    struct err e = {0};
    double v[64 * 9];
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 9; j++)
            v[i * 9 + j] = j == 0 ? (classes ? (double)((i * 7 + k) % 3) : 3.0 + sin(i + k))
                                  : sin(1.3 * i + 0.7 * j + k) * (1 + 0.1 * j);
    struct tensor *t = tensor_new(be_cpu(), dt, 2, SHAPE(64, 9), &e);
    cr_assert_eq(tensor_copy_from_host_f64(t, v, &e), 0);
    return t;
}

/* One step as the daemon runs it; returns the loss. */
static double step(struct nn_model *m, struct optim *o, struct ag_tape *tp, int it)
{
    struct err e = {0};
    bool cls = nn_num_outputs(m) == 3;
    struct tensor *b = batch(it % 4, cls, nn_dtype(m));
    struct tensor *X = tensor_slice(b, 1, 1, 9, &e), *y = tensor_select(b, 1, 0, &e);
    struct tensor *loss = nn_forward_loss(m, tp, cls ? NN_LOSS_CROSS_ENTROPY : NN_LOSS_MSE, X, y, &e);
    cr_assert_not_null(loss, "%s", e.msg);
    double l = item(loss), norm;
    cr_assert_eq(ag_backward(tp, loss, &e), 0, "%s", e.msg);
    cr_assert_eq(optim_clip_grad_norm(m, 0.5, &norm, &e), 0, "%s", e.msg);
    cr_assert_eq(optim_step(o, &e), 0, "%s", e.msg);
    nn_zero_grad(m);
    ag_tape_reset(tp);
    tensor_free(X), tensor_free(y), tensor_free(b);
    return l;
}

static void expect_same_bytes(struct tensor *a, struct tensor *b, const char *what)
{
    size_t n = (size_t)tensor_numel(a) * tensor_dtype_size(a->dtype);
    cr_assert_eq(tensor_numel(a), tensor_numel(b), "%s", what);
    cr_assert_eq(memcmp(a->data, b->data, n), 0, "%s differs", what);
}

Test(ckpt, round_trip_gives_identical_tensors_state_and_metadata)
{
    struct err e = {0};
    struct nn_model *m = mlp(1), *m2 = mlp(2);
    struct optim *o = optimizer(m, OPTIM_ADAM), *o2 = optimizer(m2, OPTIM_ADAM);
    struct ag_tape *tp = ag_tape_new(&e);
    for (int i = 0; i < 3; i++)
        step(m, o, tp, i);
    struct ckpt_kv meta[] = {{"job_id", "j-1"}, {"iteration", "3"}, {"cursor", "{\"epoch\":0}"}};
    cr_assert_eq(ckpt_save(file("a.safetensors"), m, o, meta, 3, &e), 0, "%s", e.msg);
    struct ckpt_meta *md;
    cr_assert_eq(ckpt_load(file("a.safetensors"), m2, o2, &md, &e), 0, "%s", e.msg);
    expect_same_bytes(nn_params_flat(m), nn_params_flat(m2), "parameters");
    for (int s = 0; s < optim_num_states(o); s++)
        expect_same_bytes(optim_state(o, s, NULL), optim_state(o2, s, NULL), "optimizer state");
    cr_assert_eq(optim_steps(o2), 3);
    cr_assert_str_eq(ckpt_meta_get(md, "job_id"), "j-1");
    cr_assert_str_eq(ckpt_meta_get(md, "cursor"), "{\"epoch\":0}");
    cr_assert_str_eq(ckpt_meta_get(md, "optim.state"), "exp_avg,exp_avg_sq");
    cr_assert_str_eq(ckpt_meta_get(md, "optim.type"), "adam");
    cr_assert_str_eq(ckpt_meta_get(md, "optim.step"), "3");
    cr_assert_str_eq(ckpt_meta_get(md, "format"), "pt");
    ckpt_meta_free(md);
    ag_tape_free(tp);
    optim_free(o), optim_free(o2), nn_model_free(m), nn_model_free(m2);
}

/* 2N uninterrupted steps, against N steps + save + load into fresh objects + N steps. */
static void expect_bit_identical_resume(struct nn_model *(*make)(uint64_t), enum optim_kind kind)
{
    struct err e = {0};
    enum { N = 6 };
    double straight[2 * N], resumed[2 * N];
    struct ag_tape *tp = ag_tape_new(&e);
    struct nn_model *m = make(5);
    struct optim *o = optimizer(m, kind);
    for (int i = 0; i < 2 * N; i++)
        straight[i] = step(m, o, tp, i);
    optim_free(o), nn_model_free(m);

    m = make(5);
    o = optimizer(m, kind);
    for (int i = 0; i < N; i++)
        resumed[i] = step(m, o, tp, i);
    cr_assert_eq(ckpt_save(file("r.safetensors"), m, o, NULL, 0, &e), 0, "%s", e.msg);
    optim_free(o), nn_model_free(m);
    m = make(99);   /* different parameters until the load */
    o = optimizer(m, kind);
    cr_assert_eq(ckpt_load(file("r.safetensors"), m, o, NULL, &e), 0, "%s", e.msg);
    for (int i = N; i < 2 * N; i++)
        resumed[i] = step(m, o, tp, i);
    for (int i = 0; i < 2 * N; i++)
        cr_assert_eq(memcmp(&straight[i], &resumed[i], sizeof(double)), 0,
                     "step %d: %.17g uninterrupted, %.17g resumed", i, straight[i], resumed[i]);
    optim_free(o), nn_model_free(m);
    ag_tape_free(tp);
}

Test(ckpt, resume_of_linear_model_with_sgd_momentum_is_bit_identical)
{
    expect_bit_identical_resume(linear, OPTIM_SGD);
}

Test(ckpt, resume_of_linear_model_with_adam_is_bit_identical)
{
    expect_bit_identical_resume(linear, OPTIM_ADAM);
}

Test(ckpt, resume_of_mlp_with_sgd_momentum_is_bit_identical)
{
    expect_bit_identical_resume(mlp, OPTIM_SGD);
}

Test(ckpt, resume_of_mlp_with_adam_is_bit_identical)
{
    expect_bit_identical_resume(mlp, OPTIM_ADAM);
}

Test(ckpt, linear_model_tensors_are_named_w_and_b)
{
    struct err e = {0};
    struct nn_model *m = linear(0);
    cr_assert_eq(ckpt_save(file("l.safetensors"), m, NULL, NULL, 0, &e), 0, "%s", e.msg);
    FILE *f = fopen(file("l.safetensors"), "rb");
    char buf[512] = {0};
    cr_assert_gt(fread(buf, 1, sizeof buf - 1, f), 8);
    fclose(f);
    uint64_t hlen;
    memcpy(&hlen, buf, 8);
    cr_assert_eq((8 + hlen) % 8, 0, "data not 8-byte aligned");
    cr_assert(strstr(buf + 8, "\"w\":{\"dtype\":\"F64\",\"shape\":[8,1],\"data_offsets\":[0,64]}"),
              "%s", buf + 8);
    cr_assert(strstr(buf + 8, "\"b\":{\"dtype\":\"F64\",\"shape\":[1,1],\"data_offsets\":[64,72]}"),
              "%s", buf + 8);
    nn_model_free(m);
}

Test(ckpt, file_from_an_independent_writer_loads)
{
    struct err e = {0};
    struct nn_layer_spec net[] = {{NN_LAYER_LINEAR, 4}, {NN_LAYER_TANH, 0}, {NN_LAYER_LINEAR, 2}};
    struct nn_model *m;
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F64, 6, net, 3, &m, &e), 0);
    struct optim *o = optimizer(m, OPTIM_ADAM);
    struct ckpt_meta *md;
    char path[512];
    snprintf(path, sizeof path, "%s/core_ckpt_ref.safetensors", FIXTURES_DIR);
    cr_assert_eq(ckpt_load(path, m, o, &md, &e), 0, "%s", e.msg);
    const char *names[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    for (int i = 0; i < 4; i++) {
        char rec[64];
        int64_t n;
        double *want = fixture_read("core_ckpt_ref.txt", names[i], &n), *got = host_values(nn_param(m, i));
        for (int64_t j = 0; j < n; j++)
            cr_assert_eq(got[j], want[j], "%s[%lld]", names[i], (long long)j);
        free(want), free(got);
        for (int s = 0; s < 2; s++) {
            const char *sn;
            struct tensor *st = optim_state(o, s, &sn);
            snprintf(rec, sizeof rec, "optim.%s.%s", sn, names[i]);
            want = fixture_read("core_ckpt_ref.txt", rec, &n);
            double *all = host_values(st);
            double *p = all + (nn_param(m, i)->data - nn_params_flat(m)->data) / 8;
            for (int64_t j = 0; j < n; j++)
                cr_assert_eq(p[j], want[j], "%s[%lld]", rec, (long long)j);
            free(want), free(all);
        }
    }
    cr_assert_eq(optim_steps(o), 42);
    cr_assert_str_eq(ckpt_meta_get(md, "job_id"), "ref-job");
    ckpt_meta_free(md);
    optim_free(o), nn_model_free(m);
}

Test(ckpt, save_replaces_the_file_and_leaves_no_temp_files)
{
    struct err e = {0};
    struct nn_model *m = mlp(1);
    cr_assert_eq(ckpt_save(file("x.safetensors"), m, NULL, NULL, 0, &e), 0, "%s", e.msg);
    cr_assert_eq(ckpt_save(file("x.safetensors"), m, NULL, NULL, 0, &e), 0, "%s", e.msg);
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') {
            cr_assert_str_eq(de->d_name, "x.safetensors");
            n++;
        }
    closedir(d);
    cr_assert_eq(n, 1);
    nn_model_free(m);
}

Test(ckpt, reserved_metadata_keys_are_refused)
{
    struct err e = {0};
    struct nn_model *m = mlp(1);
    struct ckpt_kv meta[] = {{"optim.step", "7"}};
    cr_assert_eq(ckpt_save(file("y.safetensors"), m, NULL, meta, 1, &e), ERR_INVALID_ARG);
    cr_assert_eq(access(file("y.safetensors"), F_OK), -1);
    nn_model_free(m);
}

/* ---- corrupted files ---- */

/* Writes an 8-byte length (hlen, or strlen(json) when hlen is 0), json and nbytes of data. */
static const char *write_raw(uint64_t hlen, const char *json, size_t nbytes)
{
    const char *p = file("bad.safetensors");
    FILE *f = fopen(p, "wb");
    uint64_t n = hlen ? hlen : strlen(json);
    fwrite(&n, 8, 1, f);
    fwrite(json, 1, strlen(json), f);
    for (size_t i = 0; i < nbytes; i++)
        fputc(0, f);
    fclose(f);
    return p;
}

/* A Sequential(Linear(2, 1)) float64 header with the given pieces. */
static void expect_bad(uint64_t hlen, const char *json, size_t nbytes, const char *needle)
{
    struct err e = {0};
    struct nn_layer_spec one = {NN_LAYER_LINEAR, 1};
    struct nn_model *m;
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F64, 2, &one, 1, &m, &e), 0);
    double before[3], after[3];
    cr_assert_eq(tensor_copy_from_host_f64(nn_params_flat(m), (double[]){1, 2, 3}, &e), 0);
    cr_assert_eq(tensor_copy_to_host_f64(nn_params_flat(m), before, &e), 0);
    cr_assert_eq(ckpt_load(write_raw(hlen, json, nbytes), m, NULL, NULL, &e), ERR_INVALID_DATA,
                 "code %d: %s", e.code, e.msg);
    cr_assert(strstr(e.msg, needle), "message '%s' lacks '%s'", e.msg, needle);
    cr_assert_eq(tensor_copy_to_host_f64(nn_params_flat(m), after, &e), 0);
    cr_assert_eq(memcmp(before, after, sizeof before), 0, "a failed load changed the model");
    nn_model_free(m);
}

#define W_OK_ "\"0.weight\":{\"dtype\":\"F64\",\"shape\":[1,2],\"data_offsets\":[0,16]}"
#define B_OK_ "\"0.bias\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[16,24]}"

Test(ckpt, well_formed_raw_file_loads)
{
    struct err e = {0};
    struct nn_layer_spec one = {NN_LAYER_LINEAR, 1};
    struct nn_model *m;
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F64, 2, &one, 1, &m, &e), 0);
    cr_assert_eq(ckpt_load(write_raw(0, "{" W_OK_ "," B_OK_ "}", 24), m, NULL, NULL, &e), 0, "%s", e.msg);
    nn_model_free(m);
}

Test(ckpt, truncated_data_fails)
{
    expect_bad(0, "{" W_OK_ "," B_OK_ "}", 20, "past the data");
}

Test(ckpt, header_length_past_the_file_fails)
{
    expect_bad(1u << 30, "{" W_OK_ "," B_OK_ "}", 24, "header length");
}

Test(ckpt, file_shorter_than_the_length_field_fails)
{
    struct err e = {0};
    struct nn_model *m = linear(0);
    FILE *f = fopen(file("short.safetensors"), "wb");
    fwrite("abc", 1, 3, f);
    fclose(f);
    cr_assert_eq(ckpt_load(file("short.safetensors"), m, NULL, NULL, &e), ERR_INVALID_DATA);
    cr_assert(strstr(e.msg, "too short"), "%s", e.msg);
    nn_model_free(m);
}

Test(ckpt, header_that_is_not_json_fails_without_echoing_it)
{
    expect_bad(0, "{\"0.weight\": SECRET", 24, "not valid JSON");
}

Test(ckpt, offsets_out_of_range_fail)
{
    expect_bad(0, "{\"0.weight\":{\"dtype\":\"F64\",\"shape\":[1,2],\"data_offsets\":[16,32]}," B_OK_ "}",
               24, "past the data");
}

Test(ckpt, offsets_that_disagree_with_the_shape_fail)
{
    expect_bad(0, "{\"0.weight\":{\"dtype\":\"F64\",\"shape\":[1,2],\"data_offsets\":[0,8]}," B_OK_ "}",
               24, "bytes of data for 2 elements");
}

Test(ckpt, overlapping_tensors_fail)
{
    expect_bad(0, "{\"0.weight\":{\"dtype\":\"F64\",\"shape\":[1,2],\"data_offsets\":[8,24]}," B_OK_ "}",
               24, "overlap");
}

Test(ckpt, wrong_dtype_fails)
{
    expect_bad(0, "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
                  "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
               12, "is float32, the model's is float64");
    expect_bad(0, "{\"0.weight\":{\"dtype\":\"I64\",\"shape\":[1,2],\"data_offsets\":[0,16]}," B_OK_ "}",
               24, "dtype other than F32 or F64");
}

Test(ckpt, wrong_shape_missing_and_unexpected_tensors_fail)
{
    expect_bad(0, "{\"0.weight\":{\"dtype\":\"F64\",\"shape\":[2,1],\"data_offsets\":[0,16]}," B_OK_ "}",
               24, "shape (1, 2)");
    expect_bad(0, "{" W_OK_ "}", 16, "no tensor '0.bias'");
    expect_bad(0, "{" W_OK_ "," B_OK_ ",\"x\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[24,32]}}",
               32, "unexpected tensor 'x'");
}

Test(ckpt, malformed_entries_and_metadata_fail)
{
    expect_bad(0, "[1,2]", 0, "not a JSON object");
    expect_bad(0, "{\"0.weight\":{\"dtype\":\"F64\",\"shape\":[1,-2],\"data_offsets\":[0,16]}," B_OK_ "}",
               24, "not a size");
    expect_bad(0, "{\"0.weight\":{\"dtype\":\"F64\",\"shape\":[1,2]}," B_OK_ "}", 24,
               "needs exactly dtype");
    expect_bad(0, "{\"__metadata__\":{\"a\":1}," W_OK_ "," B_OK_ "}", 24, "not a string");
    expect_bad(0, "{\"0.weight\":{\"dtype\":\"F64\",\"shape\":[1,2],\"data_offsets\":[16,0]}," B_OK_ "}",
               24, "begin <= end");
}

Test(ckpt, optimizer_state_must_be_present_and_of_the_same_type)
{
    struct err e = {0};
    struct nn_model *m = mlp(1);
    struct optim *sgd = optimizer(m, OPTIM_SGD), *adam = optimizer(m, OPTIM_ADAM);
    cr_assert_eq(ckpt_save(file("s.safetensors"), m, sgd, NULL, 0, &e), 0, "%s", e.msg);
    cr_assert_eq(ckpt_load(file("s.safetensors"), m, adam, NULL, &e), ERR_INVALID_DATA);
    cr_assert(strstr(e.msg, "no adam optimizer state"), "%s", e.msg);
    cr_assert_eq(ckpt_save(file("p.safetensors"), m, NULL, NULL, 0, &e), 0, "%s", e.msg);
    cr_assert_eq(ckpt_load(file("p.safetensors"), m, sgd, NULL, &e), ERR_INVALID_DATA);
    /* parameters only into a model without an optimizer: fine (init from a checkpoint) */
    cr_assert_eq(ckpt_load(file("s.safetensors"), m, NULL, NULL, &e), 0, "%s", e.msg);
    optim_free(sgd), optim_free(adam), nn_model_free(m);
}

Test(ckpt, missing_file_is_an_io_error)
{
    struct err e = {0};
    struct nn_model *m = linear(0);
    cr_assert_eq(ckpt_load(file("none.safetensors"), m, NULL, NULL, &e), ERR_IO);
    nn_model_free(m);
}

/* ---- the header alone ---- */

Test(ckpt, metadata_is_read_without_a_model)
{
    struct err e = {0};
    struct nn_model *m = mlp(3);
    const struct ckpt_kv kv[] = {{"job_id", "abc"}, {"outputs", "3"}};
    cr_assert_eq(ckpt_save(file("meta.safetensors"), m, NULL, kv, 2, &e), 0, "%s", e.msg);
    struct ckpt_meta *md;
    cr_assert_eq(ckpt_meta_read(file("meta.safetensors"), &md, &e), 0, "%s", e.msg);
    cr_expect_str_eq(ckpt_meta_get(md, "job_id"), "abc");
    cr_expect_str_eq(ckpt_meta_get(md, "outputs"), "3");
    ckpt_meta_free(md);
    nn_model_free(m);
}

Test(ckpt, metadata_of_a_bad_header_is_refused_as_a_load_refuses_it)
{
    struct err e = {0};
    struct ckpt_meta *md;
    cr_assert_eq(ckpt_meta_read(write_raw(1u << 30, "{" W_OK_ "," B_OK_ "}", 24), &md, &e), ERR_INVALID_DATA);
    cr_expect(strstr(e.msg, "header length"), "%s", e.msg);
    cr_assert_eq(ckpt_meta_read(write_raw(0, "{" W_OK_ "," B_OK_ "}", 20), &md, &e), ERR_INVALID_DATA);
    cr_expect(strstr(e.msg, "past the data"), "%s", e.msg);
    cr_assert_eq(ckpt_meta_read(write_raw(0, "{\"__metadata__\":{\"a\":1}}", 0), &md, &e), ERR_INVALID_DATA);
    cr_expect_null(md);
    cr_assert_eq(ckpt_meta_read(file("none.safetensors"), &md, &e), ERR_IO);
}
