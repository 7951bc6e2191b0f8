/* test_model_bytes.c — spec_model_bytes: a spec's parameters in bytes, as PyTorch's numel() counts them. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "spec.h"
#include "spec_compile.h"

static struct job_spec *parse(const char *model_and_dtype)
{
    char text[512];
    snprintf(text, sizeof text, "{\"data\":{\"train\":\"x\"},\"iterations\":1,%s}", model_and_dtype);
    json_t *root = json_loads(text, 0, NULL);
    cr_assert_not_null(root, "%s", text);
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(spec_parse(root, &s, &se), 0, "%s: %s", se.field, se.message);
    json_decref(root);
    return s;
}

/* sum(p.numel() for p in model.parameters()) times the dtype's bytes. */
Test(model_bytes, linear_regression_is_w_and_b)
{
    struct job_spec *s = parse("\"model\":{\"type\":\"linear\"},\"dtype\":\"float64\"");
    cr_expect_eq(spec_model_bytes(s, 8, 0), (8 + 1) * 8);
    spec_free(s);
}

Test(model_bytes, an_mlp_counts_each_linear_layers_weight_and_bias)
{
    /* Linear(8, 256), Linear(256, 256), Linear(256, 1): 2304 + 65792 + 257 parameters. */
    struct job_spec *s = parse("\"model\":{\"type\":\"mlp\",\"hidden\":[256,256]},\"dtype\":\"float32\"");
    cr_expect_eq(spec_model_bytes(s, 8, 0), 68353 * 4);
    cr_expect_eq(spec_model_bytes(s, 8, 3), (2304 + 65792 + 771) * 4, "three outputs");
    spec_free(s);
}

Test(model_bytes, explicit_layers_count_only_their_linear_ones)
{
    /* Linear(8, 256), ReLU, Linear(256, 3): 2304 + 771 parameters. */
    struct job_spec *s = parse("\"model\":{\"layers\":[{\"linear\":256},{\"relu\":{}},{\"linear\":3}]},"
                               "\"loss\":\"cross_entropy\",\"dtype\":\"float64\"");
    cr_expect_eq(spec_model_bytes(s, 8, 0), (2304 + 771) * 8);
    spec_free(s);
}

Test(model_bytes, a_count_past_64_bits_saturates)
{
    struct job_spec *s = parse("\"model\":{\"type\":\"mlp\",\"hidden\":[65536,65536]},\"dtype\":\"float64\"");
    cr_expect_eq(spec_model_bytes(s, INT64_MAX / 2, 0), UINT64_MAX);
    spec_free(s);
}
