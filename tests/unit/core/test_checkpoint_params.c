/* test_checkpoint_params.c — ckpt_load_params_mem: parameters only, as PyTorch's strict
 * load_state_dict, from a file written by an independent writer (tests/fixtures/safetensors_ref.py). */
#include <string.h>

#include "checkpoint.h"
#include "helpers.h"
#include "nn.h"

static const char *const NAMES[] = {"0.weight", "0.bias", "2.weight", "2.bias"};

/* The reference file (Sequential(Linear(6,4), Tanh, Linear(4,2)), float64, with Adam state) in memory. */
static char *ref_file(size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/core_ckpt_ref.safetensors", FIXTURES_DIR);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_gt(n, 8);
    rewind(f);
    char *buf = malloc((size_t)n);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static struct nn_model *net(enum tensor_dtype dt, int64_t in, int64_t hidden, int64_t out)
{
    struct nn_layer_spec layers[] = {{NN_LAYER_LINEAR, hidden}, {NN_LAYER_TANH, 0}, {NN_LAYER_LINEAR, out}};
    struct nn_model *m;
    struct err e = {0};
    cr_assert_eq(nn_sequential(be_cpu(), dt, in, layers, 3, &m, &e), 0, "%s", e.msg);
    return m;
}

/* Loads the reference into m, expecting failure with a message containing each of want. */
static void expect_refused(struct nn_model *m, const char *const *want, int n_want)
{
    size_t len;
    char *buf = ref_file(&len);
    struct err e = {0};
    double *before = host_values(nn_param(m, 0));
    cr_assert_neq(ckpt_load_params_mem(buf, len, "ref.safetensors", m, &e), 0, "loaded into the wrong model");
    cr_expect_eq(e.code, ERR_INVALID_DATA);
    for (int i = 0; i < n_want; i++)
        cr_expect_not_null(strstr(e.msg, want[i]), "'%s' is not in: %s", want[i], e.msg);
    double *after = host_values(nn_param(m, 0));
    cr_expect_eq(memcmp(before, after, (size_t)tensor_numel(nn_param(m, 0)) * sizeof(double)), 0,
                 "a refused file changed the model");
    free(before), free(after), free(buf);
}

Test(ckpt_params, parameters_of_an_independent_writers_file_load_and_its_optimizer_state_is_ignored)
{
    size_t len;
    char *buf = ref_file(&len);
    struct nn_model *m = net(TENSOR_F64, 6, 4, 2);
    struct err e = {0};
    cr_assert_eq(ckpt_load_params_mem(buf, len, "ref.safetensors", m, &e), 0, "%s", e.msg);
    for (int i = 0; i < 4; i++) {
        int64_t n;
        double *want = fixture_read("core_ckpt_ref.txt", NAMES[i], &n), *got = host_values(nn_param(m, i));
        cr_assert_eq(n, tensor_numel(nn_param(m, i)));
        for (int64_t j = 0; j < n; j++)
            cr_assert_eq(got[j], want[j], "%s[%lld]", NAMES[i], (long long)j);
        free(want), free(got);
    }
    nn_model_free(m);
    free(buf);
}

Test(ckpt_params, float64_values_load_into_a_float32_model_rounded_as_torch_copies_them)
{
    size_t len;
    char *buf = ref_file(&len);
    struct nn_model *m = net(TENSOR_F32, 6, 4, 2);
    struct err e = {0};
    cr_assert_eq(ckpt_load_params_mem(buf, len, "ref.safetensors", m, &e), 0, "%s", e.msg);
    for (int i = 0; i < 4; i++) {
        int64_t n;
        double *want = fixture_read("core_ckpt_ref.txt", NAMES[i], &n), *got = host_values(nn_param(m, i));
        for (int64_t j = 0; j < n; j++)
            cr_assert_eq(got[j], (double)(float)want[j], "%s[%lld]", NAMES[i], (long long)j);
        free(want), free(got);
    }
    nn_model_free(m);
    free(buf);
}

Test(ckpt_params, a_shape_mismatch_names_the_tensor_and_both_shapes)
{
    struct nn_model *m = net(TENSOR_F64, 6, 3, 2);
    expect_refused(m, (const char *const[]){"size mismatch for 0.weight", "(4, 6)", "(3, 6)"}, 3);
    nn_model_free(m);
}

Test(ckpt_params, a_parameter_the_file_lacks_is_a_missing_key)
{
    struct nn_model *m;
    struct err e = {0};
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 6, &m, &e), 0, "%s", e.msg);
    expect_refused(m, (const char *const[]){"missing key 'w'"}, 1);
    nn_model_free(m);
}

Test(ckpt_params, a_tensor_the_model_lacks_is_an_unexpected_key)
{
    struct nn_layer_spec layers[] = {{NN_LAYER_LINEAR, 4}};
    struct nn_model *m;
    struct err e = {0};
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F64, 6, layers, 1, &m, &e), 0, "%s", e.msg);
    expect_refused(m, (const char *const[]){"unexpected key '2."}, 1);
    nn_model_free(m);
}

Test(ckpt_params, a_truncated_image_is_refused_without_reading_past_it)
{
    size_t len;
    char *buf = ref_file(&len);
    struct nn_model *m = net(TENSOR_F64, 6, 4, 2);
    struct err e = {0};
    for (size_t cut = 0; cut < len; cut += 1 + cut / 3)
        cr_expect_neq(ckpt_load_params_mem(buf, cut, "cut.safetensors", m, &e), 0, "%zu bytes loaded", cut);
    nn_model_free(m);
    free(buf);
}
