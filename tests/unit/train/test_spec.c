/* test_spec.c — job spec validation: one rule per test. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"

/* Parses text; returns 0 and *out, or -1 with *se. */
static int parse(const char *text, struct job_spec **out, struct spec_error *se)
{
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    cr_assert_not_null(root, "test spec is not JSON: %s", je.text);
    int rc = spec_parse(root, out, se);
    json_decref(root);
    return rc;
}

static void expect_rejected(const char *text, const char *field)
{
    struct job_spec *s = NULL;
    struct spec_error se;
    cr_assert_eq(parse(text, &s, &se), -1, "accepted: %s", text);
    cr_assert_null(s);
    cr_assert_str_eq(se.field, field, "field %s, message %s", se.field, se.message);
    cr_assert_neq(se.message[0], '\0');
}

/* text, which must be accepted, parsed. */
static struct job_spec *accepted(const char *text)
{
    struct job_spec *s = NULL;
    struct spec_error se;
    cr_assert_eq(parse(text, &s, &se), 0, "%s: %s: %s", text, se.field, se.message);
    return s;
}

#define MINIMAL "{\"data\":{\"train\":\"d/part*.csv\"},\"iterations\":50"

Test(spec, minimal_spec_gets_the_defaults_of_design_section_3)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL "}", &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_str_eq(s->data.train, "d/part*.csv");
    cr_expect_eq(s->iterations, 50);
    cr_expect_eq(s->batch_size, 1048576);
    cr_expect_eq(s->dtype, TENSOR_F64);
    cr_expect_eq(s->seed, 0);
    cr_expect_eq(s->optimizer.lr, 0.03);
    cr_expect_eq(s->optimizer.momentum, 0.0);
    cr_expect_eq(s->clip_grad_norm, 0.0);
    cr_expect_eq(s->data.header, SPEC_HEADER_AUTO);
    cr_expect_eq(s->data.label, 0);
    cr_expect_eq(s->device, SPEC_DEVICE_AUTO);
    cr_expect_null(s->name);
    cr_expect_null(s->data.shards);
    spec_free(s);
}

Test(spec, baseline_spec_of_the_reference_is_accepted_as_written)
{
    const char *text =
        "{\"name\":\"dc-taxi-baseline\",\"client_id\":\"k1\",\"priority\":3,"
        "\"data\":{\"train\":\"file:///d/part*.csv\",\"shards\":\"/d/.meta/shards/*.csv\","
        "\"format\":\"csv\",\"header\":false,\"label\":0,\"features\":\"rest\","
        "\"shuffle\":null,\"drop_last\":true,\"endpoint\":null,\"region\":\"us-east-1\",\"anonymous\":false},"
        "\"model\":{\"type\":\"linear\"},\"loss\":\"mse\","
        "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.05,\"momentum\":0.9,\"weight_decay\":0.001},"
        "\"clip_grad_norm\":0.5,\"batch_size\":65536,\"iterations\":7,\"dtype\":\"float32\","
        "\"device\":\"cpu\",\"seed\":42,\"init\":\"kaiming_uniform\",\"eval_every\":0,\"checkpoint_every\":0}";
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(text, &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_str_eq(s->name, "dc-taxi-baseline");
    cr_expect_str_eq(s->client_id, "k1");
    cr_expect_eq(s->priority, 3);
    cr_expect_str_eq(s->data.shards, "/d/.meta/shards/*.csv");
    cr_expect_eq(s->data.header, SPEC_HEADER_NO);
    cr_expect(s->data.drop_last);
    cr_expect_eq(s->optimizer.lr, 0.05);
    cr_expect_eq(s->optimizer.momentum, 0.9);
    cr_expect_eq(s->optimizer.weight_decay, 0.001);
    cr_expect_eq(s->clip_grad_norm, 0.5);
    cr_expect_eq(s->batch_size, 65536);
    cr_expect_eq(s->dtype, TENSOR_F32);
    cr_expect_eq(s->device, SPEC_DEVICE_CPU);
    cr_expect_eq(s->seed, 42);
    spec_free(s);
}

Test(spec, normalized_json_shows_every_default)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL "}", &s, &se), 0);
    json_t *j = spec_to_json(s);
    cr_assert_not_null(j);
    cr_expect_eq(json_integer_value(json_object_get(j, "batch_size")), 1048576);
    cr_expect_str_eq(json_string_value(json_object_get(j, "dtype")), "float64");
    cr_expect_eq(json_real_value(json_object_get(json_object_get(j, "optimizer"), "lr")), 0.03);
    cr_expect(json_is_null(json_object_get(j, "clip_grad_norm")));
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "data"), "header")), "auto");
    json_decref(j);
    spec_free(s);
}

Test(spec, unknown_top_level_field_is_rejected_with_its_name)
{
    expect_rejected(MINIMAL ",\"learning_rate\":0.1}", "learning_rate");
}

Test(spec, unknown_nested_field_is_rejected_with_its_path)
{
    expect_rejected("{\"data\":{\"train\":\"x\",\"lable\":0},\"iterations\":1}", "data.lable");
}

Test(spec, wrong_type_is_rejected)
{
    expect_rejected(MINIMAL ",\"batch_size\":\"big\"}", "batch_size");
}

Test(spec, fractional_iterations_are_rejected)
{
    expect_rejected("{\"data\":{\"train\":\"x\"},\"iterations\":1.5}", "iterations");
}

Test(spec, zero_lr_is_rejected)
{
    expect_rejected(MINIMAL ",\"optimizer\":{\"type\":\"sgd\",\"lr\":0}}", "optimizer.lr");
}

Test(spec, negative_lr_is_rejected)
{
    expect_rejected(MINIMAL ",\"optimizer\":{\"type\":\"sgd\",\"lr\":-0.1}}", "optimizer.lr");
}

Test(spec, missing_data_train_is_rejected)
{
    expect_rejected("{\"data\":{},\"iterations\":1}", "data.train");
}

Test(spec, missing_data_is_rejected)
{
    expect_rejected("{\"iterations\":1}", "data");
}

Test(spec, missing_iterations_is_rejected)
{
    expect_rejected("{\"data\":{\"train\":\"x\"}}", "iterations");
}

Test(spec, batch_size_above_2_pow_26_is_rejected)
{
    expect_rejected(MINIMAL ",\"batch_size\":67108865}", "batch_size");
}

Test(spec, zero_batch_size_is_rejected)
{
    expect_rejected(MINIMAL ",\"batch_size\":0}", "batch_size");
}

Test(spec, iterations_above_a_billion_are_rejected)
{
    expect_rejected("{\"data\":{\"train\":\"x\"},\"iterations\":1000000001}", "iterations");
}

Test(spec, mlp_takes_hidden_widths_activation_and_pytorchs_default_init)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"model\":{\"type\":\"mlp\",\"hidden\":[64,32],\"activation\":\"tanh\"}}",
                       &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_eq(s->model, SPEC_MODEL_MLP);
    cr_expect_eq(s->net.n_hidden, 2);
    cr_expect_eq(s->net.hidden[0], 64);
    cr_expect_eq(s->net.hidden[1], 32);
    cr_expect_eq(s->net.activation, NN_LAYER_TANH);
    cr_expect_eq(s->net.outputs, 0, "outputs come from the loss and data when not given");
    cr_expect_eq(s->init, NN_INIT_DEFAULT);
    json_t *j = spec_to_json(s);
    json_t *m = json_object_get(j, "model");
    cr_expect_str_eq(json_string_value(json_object_get(m, "activation")), "tanh");
    cr_expect_eq(json_array_size(json_object_get(m, "hidden")), 2);
    cr_expect_str_eq(json_string_value(json_object_get(j, "init")), "default");
    json_decref(j);
    spec_free(s);
}

Test(spec, mlp_needs_hidden_widths)
{
    expect_rejected(MINIMAL ",\"model\":{\"type\":\"mlp\"}}", "model.hidden");
}

Test(spec, mlp_hidden_width_must_be_positive)
{
    expect_rejected(MINIMAL ",\"model\":{\"type\":\"mlp\",\"hidden\":[64,0]}}", "model.hidden");
}

Test(spec, explicit_layers_are_kept_in_order)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"model\":{\"layers\":[{\"linear\":16},{\"relu\":{}},{\"linear\":1}]}}",
                       &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_eq(s->model, SPEC_MODEL_LAYERS);
    cr_assert_eq(s->net.n_layers, 3);
    cr_expect_eq(s->net.layers[0].kind, NN_LAYER_LINEAR);
    cr_expect_eq(s->net.layers[0].out_features, 16);
    cr_expect_eq(s->net.layers[1].kind, NN_LAYER_RELU);
    cr_expect_eq(s->net.layers[2].out_features, 1);
    spec_free(s);
}

Test(spec, unknown_layer_is_rejected_with_its_index)
{
    expect_rejected(MINIMAL ",\"model\":{\"layers\":[{\"linear\":16},{\"gelu\":{}}]}}", "model.layers[1]");
}

Test(spec, hidden_is_not_for_the_linear_model)
{
    expect_rejected(MINIMAL ",\"model\":{\"type\":\"linear\",\"hidden\":[4]}}", "model.hidden");
}

Test(spec, cross_entropy_needs_a_network_not_the_linear_model)
{
    expect_rejected(MINIMAL ",\"loss\":\"cross_entropy\"}", "loss");
}

Test(spec, cross_entropy_and_bce_are_accepted_with_an_mlp)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"model\":{\"type\":\"mlp\",\"hidden\":[8]},\"loss\":\"cross_entropy\"}",
                       &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_eq(s->loss, NN_LOSS_CROSS_ENTROPY);
    spec_free(s);
    cr_assert_eq(parse(MINIMAL ",\"model\":{\"type\":\"mlp\",\"hidden\":[8]},\"loss\":\"bce\"}",
                       &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_eq(s->loss, NN_LOSS_BCE_WITH_LOGITS);
    spec_free(s);
}

Test(spec, unknown_model_type_is_rejected)
{
    expect_rejected(MINIMAL ",\"model\":{\"type\":\"transformer\"}}", "model.type");
}

Test(spec, adam_gets_torchs_defaults)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"optimizer\":{\"type\":\"adam\"}}", &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_eq(s->optimizer.kind, OPTIM_ADAM);
    cr_expect_eq(s->optimizer.lr, 1e-3);
    cr_expect_eq(s->optimizer.beta1, 0.9);
    cr_expect_eq(s->optimizer.beta2, 0.999);
    cr_expect_eq(s->optimizer.eps, 1e-8);
    cr_expect_eq(s->optimizer.weight_decay, 0.0);
    spec_free(s);
}

Test(spec, adamw_defaults_to_weight_decay_0_01)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"optimizer\":{\"type\":\"adamw\",\"betas\":[0.8,0.99]}}", &s, &se), 0,
                 "%s: %s", se.field, se.message);
    cr_expect_eq(s->optimizer.kind, OPTIM_ADAMW);
    cr_expect_eq(s->optimizer.weight_decay, 0.01);
    cr_expect_eq(s->optimizer.beta1, 0.8);
    spec_free(s);
}

Test(spec, betas_must_be_two_numbers_below_one)
{
    expect_rejected(MINIMAL ",\"optimizer\":{\"type\":\"adam\",\"betas\":[0.9,1.0]}}", "optimizer.betas");
}

Test(spec, momentum_with_adam_is_refused)
{
    expect_rejected(MINIMAL ",\"optimizer\":{\"type\":\"adam\",\"momentum\":0.9}}", "optimizer.momentum");
}

Test(spec, betas_with_sgd_are_refused)
{
    expect_rejected(MINIMAL ",\"optimizer\":{\"type\":\"sgd\",\"betas\":[0.9,0.999]}}", "optimizer.betas");
}

Test(spec, nesterov_needs_momentum)
{
    expect_rejected(MINIMAL ",\"optimizer\":{\"type\":\"sgd\",\"nesterov\":true}}", "optimizer.nesterov");
}

Test(spec, unknown_optimizer_is_rejected)
{
    expect_rejected(MINIMAL ",\"optimizer\":{\"type\":\"lbfgs\"}}", "optimizer.type");
}

Test(spec, cuda_device_stores_its_index)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"device\":\"cuda:7\"}", &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_eq(s->device, SPEC_DEVICE_CUDA);
    cr_expect_eq(s->device_index, 7);
    spec_free(s);
}

Test(spec, cuda_device_is_written_back_as_given)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"device\":\"cuda:63\"}", &s, &se), 0, "%s: %s", se.field, se.message);
    json_t *j = spec_to_json(s);
    cr_expect_str_eq(json_string_value(json_object_get(j, "device")), "cuda:63");
    json_decref(j);
    spec_free(s);
}

Test(spec, cuda_device_without_a_number_is_rejected)
{
    expect_rejected(MINIMAL ",\"device\":\"cuda:x\"}", "device");
}

Test(spec, cuda_device_past_63_is_rejected)
{
    expect_rejected(MINIMAL ",\"device\":\"cuda:64\"}", "device");
}

Test(spec, cuda_device_with_sign_or_leading_zero_is_rejected)
{
    expect_rejected(MINIMAL ",\"device\":\"cuda:-1\"}", "device");
    expect_rejected(MINIMAL ",\"device\":\"cuda:01\"}", "device");
    expect_rejected(MINIMAL ",\"device\":\"cuda\"}", "device");
}

Test(spec, device_list_keeps_its_devices_in_order)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"device\":[\"cuda:3\",\"cpu\",\"cuda:0\"]}", &s, &se), 0, "%s: %s",
                 se.field, se.message);
    cr_expect_eq(s->device, SPEC_DEVICE_LIST);
    cr_assert_eq(s->n_devices, 3);
    cr_expect_eq(s->devices[0].kind, SPEC_DEVICE_CUDA);
    cr_expect_eq(s->devices[0].index, 3);
    cr_expect_eq(s->devices[1].kind, SPEC_DEVICE_CPU);
    cr_expect_eq(s->devices[2].kind, SPEC_DEVICE_CUDA);
    cr_expect_eq(s->devices[2].index, 0);
    spec_free(s);
}

Test(spec, device_list_is_written_back_as_given)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"device\":[\"cuda:63\",\"cpu\"]}", &s, &se), 0, "%s: %s",
                 se.field, se.message);
    json_t *j = spec_to_json(s);
    json_t *d = json_object_get(j, "device");
    cr_assert(json_is_array(d), "device written back as %s", json_dumps(d, JSON_ENCODE_ANY));
    cr_assert_eq(json_array_size(d), 2);
    cr_expect_str_eq(json_string_value(json_array_get(d, 0)), "cuda:63");
    cr_expect_str_eq(json_string_value(json_array_get(d, 1)), "cpu");
    json_decref(j);
    spec_free(s);
}

Test(spec, device_list_survives_a_round_trip_through_its_json)
{
    struct job_spec *s, *again;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"device\":[\"cpu\",\"cuda:2\"]}", &s, &se), 0, "%s", se.message);
    json_t *j = spec_to_json(s);
    cr_assert_eq(spec_parse(j, &again, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_eq(again->device, SPEC_DEVICE_LIST);
    cr_assert_eq(again->n_devices, 2);
    cr_expect_eq(again->devices[0].kind, SPEC_DEVICE_CPU);
    cr_expect_eq(again->devices[1].index, 2);
    json_decref(j);
    spec_free(s);
    spec_free(again);
}

Test(spec, device_list_names_itself_joined_by_commas)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"device\":[\"cuda:1\",\"cpu\"]}", &s, &se), 0, "%s", se.message);
    char name[64];
    spec_device_name(s, name, sizeof name);
    cr_expect_str_eq(name, "cuda:1,cpu");
    spec_free(s);
}

Test(spec, empty_device_list_is_rejected)
{
    expect_rejected(MINIMAL ",\"device\":[]}", "device");
}

Test(spec, device_list_element_is_validated_like_a_device)
{
    expect_rejected(MINIMAL ",\"device\":[\"cuda:0\",\"cuda:64\"]}", "device[1]");
    expect_rejected(MINIMAL ",\"device\":[\"cpu\",\"cuda:01\"]}", "device[1]");
    expect_rejected(MINIMAL ",\"device\":[\"gpu\"]}", "device[0]");
    expect_rejected(MINIMAL ",\"device\":[\"cpu\",\"cuda:0\",7]}", "device[2]");
}

Test(spec, auto_inside_a_device_list_is_rejected)
{
    expect_rejected(MINIMAL ",\"device\":[\"cuda:0\",\"auto\"]}", "device[1]");
}

Test(spec, device_list_with_a_duplicate_is_rejected)
{
    expect_rejected(MINIMAL ",\"device\":[\"cuda:1\",\"cpu\",\"cuda:1\"]}", "device[2]");
    expect_rejected(MINIMAL ",\"device\":[\"cpu\",\"cpu\"]}", "device[1]");
}


Test(spec, unknown_dtype_is_rejected)
{
    expect_rejected(MINIMAL ",\"dtype\":\"float16\"}", "dtype");
}

Test(spec, non_positive_clip_grad_norm_is_rejected)
{
    expect_rejected(MINIMAL ",\"clip_grad_norm\":0}", "clip_grad_norm");
}

Test(spec, null_clip_grad_norm_means_no_clipping)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"clip_grad_norm\":null}", &s, &se), 0);
    cr_expect_eq(s->clip_grad_norm, 0.0);
    spec_free(s);
}

Test(spec, negative_seed_is_rejected)
{
    expect_rejected(MINIMAL ",\"seed\":-1}", "seed");
}

Test(spec, header_must_be_auto_or_a_boolean)
{
    expect_rejected("{\"data\":{\"train\":\"x\",\"header\":\"yes\"},\"iterations\":1}", "data.header");
}

Test(spec, format_defaults_to_auto_and_takes_csv_or_parquet)
{
    static const char *const words[] = {"auto", "csv", "parquet"};
    static const enum spec_format want[] = {SPEC_FORMAT_AUTO, SPEC_FORMAT_CSV, SPEC_FORMAT_PARQUET};
    struct job_spec *s = accepted(MINIMAL "}");
    cr_expect_eq(s->data.format, SPEC_FORMAT_AUTO);
    spec_free(s);
    for (int i = 0; i < 3; i++) {
        char text[256];
        snprintf(text, sizeof text, "{\"data\":{\"train\":\"x\",\"format\":\"%s\"},\"iterations\":1}", words[i]);
        s = accepted(text);
        cr_expect_eq(s->data.format, want[i], "%s", words[i]);
        spec_free(s);
    }
    expect_rejected("{\"data\":{\"train\":\"x\",\"format\":\"orc\"},\"iterations\":1}", "data.format");
}

Test(spec, features_must_be_rest_or_a_list_of_column_names_and_indices)
{
    expect_rejected("{\"data\":{\"train\":\"x\",\"features\":\"all\"},\"iterations\":1}", "data.features");
    expect_rejected("{\"data\":{\"train\":\"x\",\"features\":[]},\"iterations\":1}", "data.features");
    expect_rejected("{\"data\":{\"train\":\"x\",\"features\":[1,-1]},\"iterations\":1}", "data.features");
    expect_rejected("{\"data\":{\"train\":\"x\",\"features\":[1.5]},\"iterations\":1}", "data.features");
    expect_rejected("{\"data\":{\"train\":\"x\",\"features\":[\"\"]},\"iterations\":1}", "data.features");
}

Test(spec, label_and_features_by_name_or_index_are_kept_as_given)
{
    struct job_spec *s =
        accepted("{\"data\":{\"train\":\"x\",\"label\":\"fare\",\"features\":[\"miles\",3,\"hour\"]},\"iterations\":1}");
    cr_expect_str_eq(s->data.label_name, "fare");
    cr_assert_eq(s->data.n_features, 3);
    cr_expect_str_eq(s->data.features[0].name, "miles");
    cr_expect_null(s->data.features[1].name);
    cr_expect_eq(s->data.features[1].index, 3);
    cr_expect_str_eq(s->data.features[2].name, "hour");
    json_t *j = spec_to_json(s);
    cr_assert_not_null(j);
    char *text = json_dumps(json_object_get(j, "data"), JSON_COMPACT | JSON_SORT_KEYS);
    cr_expect(strstr(text, "\"features\":[\"miles\",3,\"hour\"]"), "%s", text);
    cr_expect(strstr(text, "\"label\":\"fare\""), "%s", text);
    free(text);
    json_decref(j);
    spec_free(s);
}

Test(spec, label_must_be_an_index_or_a_name)
{
    expect_rejected("{\"data\":{\"train\":\"x\",\"label\":-1},\"iterations\":1}", "data.label");
    expect_rejected("{\"data\":{\"train\":\"x\",\"label\":\"\"},\"iterations\":1}", "data.label");
    expect_rejected("{\"data\":{\"train\":\"x\",\"label\":[0]},\"iterations\":1}", "data.label");
}

Test(spec, empty_train_url_is_rejected)
{
    expect_rejected("{\"data\":{\"train\":\"\"},\"iterations\":1}", "data.train");
}

Test(spec, a_spec_that_is_not_an_object_is_rejected)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse("[1,2]", &s, &se), -1);
    cr_expect_not_null(strstr(se.message, "object"));
}

Test(spec, shuffle_of_partitions_and_rows_is_read_and_shown)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse("{\"data\":{\"train\":\"d/part*.csv\",\"shuffle\":{\"partitions\":true,"
                       "\"buffer\":4096}},\"iterations\":5}", &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect(s->data.shuffle_partitions);
    cr_expect_eq(s->data.shuffle_buffer, 4096);
    json_t *j = spec_to_json(s);
    json_t *sh = json_object_get(json_object_get(j, "data"), "shuffle");
    cr_expect(json_is_true(json_object_get(sh, "partitions")));
    cr_expect_eq(json_integer_value(json_object_get(sh, "buffer")), 4096);
    json_decref(j);
    spec_free(s);
}

Test(spec, unknown_shuffle_field_is_rejected_with_its_path)
{
    expect_rejected("{\"data\":{\"train\":\"d\",\"shuffle\":{\"rows\":true}},\"iterations\":5}",
                    "data.shuffle.rows");
}

Test(spec, negative_shuffle_buffer_is_rejected)
{
    expect_rejected("{\"data\":{\"train\":\"d\",\"shuffle\":{\"buffer\":-1}},\"iterations\":5}",
                    "data.shuffle.buffer");
}

Test(spec, s3_endpoint_region_and_anonymous_are_kept_for_the_dataset)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse("{\"data\":{\"train\":\"s3://b/csv/part*.csv\",\"endpoint\":\"http://127.0.0.1:9000\","
                       "\"region\":\"eu-west-1\",\"anonymous\":true},\"iterations\":5}", &s, &se),
                 0, "%s: %s", se.field, se.message);
    cr_expect_str_eq(s->data.endpoint, "http://127.0.0.1:9000");
    cr_expect_str_eq(s->data.region, "eu-west-1");
    cr_expect(s->data.anonymous);
    json_t *j = spec_to_json(s);
    json_t *d = json_object_get(j, "data");
    cr_expect_str_eq(json_string_value(json_object_get(d, "endpoint")), "http://127.0.0.1:9000");
    cr_expect(json_is_true(json_object_get(d, "anonymous")));
    json_decref(j);
    spec_free(s);
}

Test(spec, endpoint_must_be_a_string)
{
    expect_rejected("{\"data\":{\"train\":\"s3://b/x\",\"endpoint\":9000},\"iterations\":5}", "data.endpoint");
}

Test(spec, checkpoint_every_is_a_non_negative_integer)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"checkpoint_every\":100}", &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_eq(s->checkpoint_every, 100);
    spec_free(s);
    expect_rejected(MINIMAL ",\"checkpoint_every\":-1}", "checkpoint_every");
    expect_rejected(MINIMAL ",\"checkpoint_every\":1.5}", "checkpoint_every");
}

Test(spec, credentials_in_a_url_are_refused_without_echoing_them)
{
    struct job_spec *s = NULL;
    struct spec_error se;
    cr_assert_eq(parse("{\"data\":{\"train\":\"https://me:hunter2@example.com/part-0.csv\"},\"iterations\":5}",
                       &s, &se), -1);
    cr_expect_str_eq(se.field, "data.train");
    cr_expect_null(strstr(se.message, "hunter2"), "%s", se.message);
    expect_rejected("{\"data\":{\"train\":\"s3://b/part*.csv\",\"endpoint\":\"http://k:s@minio:9000\"},"
                    "\"iterations\":5}", "data.endpoint");
    cr_assert_eq(parse("{\"data\":{\"train\":\"https://example.com/a@b/part-0.csv\"},\"iterations\":5}",
                       &s, &se), 0, "an @ in the path is not a credential: %s", se.message);
    spec_free(s);
}

#define EPOCHS_ONLY "{\"data\":{\"train\":\"d/part*.csv\"},\"epochs\":3"

Test(spec, epochs_instead_of_iterations_is_accepted)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(EPOCHS_ONLY "}", &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_eq(s->epochs, 3);
    cr_expect_eq(s->iterations, 0);
    json_t *j = spec_to_json(s);
    cr_expect_eq(json_integer_value(json_object_get(j, "epochs")), 3);
    cr_expect(json_is_null(json_object_get(j, "iterations")));
    json_decref(j);
    spec_free(s);
}

Test(spec, data_test_is_kept_with_eval_every_and_shown)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse("{\"data\":{\"train\":\"d/part*.csv\",\"test\":\"t/part*.csv\"},"
                       "\"iterations\":50,\"eval_every\":10}", &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_str_eq(s->data.test, "t/part*.csv");
    cr_expect_eq(s->eval_every, 10);
    json_t *j = spec_to_json(s);
    cr_assert_not_null(j);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "data"), "test")), "t/part*.csv");
    cr_expect_eq(json_integer_value(json_object_get(j, "eval_every")), 10);
    json_decref(j);
    spec_free(s);
}

Test(spec, iterations_and_epochs_together_are_rejected)
{
    expect_rejected(MINIMAL ",\"epochs\":3}", "epochs");
}

Test(spec, epochs_outside_one_to_a_million_are_rejected)
{
    expect_rejected("{\"data\":{\"train\":\"x\"},\"epochs\":0}", "epochs");
    expect_rejected("{\"data\":{\"train\":\"x\"},\"epochs\":1000001}", "epochs");
    expect_rejected("{\"data\":{\"train\":\"x\"},\"epochs\":2.5}", "epochs");
}

Test(spec, the_spec_shown_for_an_epochs_job_is_accepted_again)
{
    struct job_spec *s, *again;
    struct spec_error se;
    cr_assert_eq(parse(EPOCHS_ONLY ",\"init\":{\"from\":\"s3://b/m/final.safetensors\"}}", &s, &se), 0,
                 "%s: %s", se.field, se.message);
    json_t *j = spec_to_json(s);
    cr_assert_eq(spec_parse(j, &again, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_eq(again->epochs, 3);
    cr_expect_str_eq(again->init_from, "s3://b/m/final.safetensors");
    json_decref(j);
    spec_free(s);
    spec_free(again);
}

Test(spec, init_from_a_job_id_is_a_job_reference)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"init\":{\"from\":\"0123456789abcdef\"}}", &s, &se), 0,
                 "%s: %s", se.field, se.message);
    cr_expect_str_eq(s->init_from, "0123456789abcdef");
    cr_expect(spec_init_from_job(s));
    json_t *j = spec_to_json(s);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "init"), "from")),
                     "0123456789abcdef");
    json_decref(j);
    spec_free(s);
}

Test(spec, init_from_a_safetensors_url_or_path_is_not_a_job_reference)
{
    const char *ok[] = {"file:///m/w.safetensors", "m/w.safetensors", "/m/w.safetensors",
                        "https://example.com/w.safetensors?sig=1", "s3://bucket/run/w.safetensors"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        char text[256];
        snprintf(text, sizeof text, MINIMAL ",\"init\":{\"from\":\"%s\"}}", ok[i]);
        struct job_spec *s;
        struct spec_error se;
        cr_assert_eq(parse(text, &s, &se), 0, "%s: %s: %s", ok[i], se.field, se.message);
        cr_expect_str_eq(s->init_from, ok[i]);
        cr_expect(!spec_init_from_job(s), "%s", ok[i]);
        spec_free(s);
    }
}

Test(spec, init_from_neither_a_job_id_nor_a_safetensors_file_is_rejected)
{
    expect_rejected(MINIMAL ",\"init\":{\"from\":\"0123456789abcde\"}}", "init.from");
    expect_rejected(MINIMAL ",\"init\":{\"from\":\"m/w.pt\"}}", "init.from");
    expect_rejected(MINIMAL ",\"init\":{\"from\":\"gcs://b/w.safetensors\"}}", "init.from");
    expect_rejected(MINIMAL ",\"init\":{\"from\":\"https://u:p@h/w.safetensors\"}}", "init.from");
    expect_rejected(MINIMAL ",\"init\":{\"from\":7}}", "init.from");
    expect_rejected(MINIMAL ",\"init\":{}}", "init.from");
    expect_rejected(MINIMAL ",\"init\":{\"from\":\"m/w.safetensors\",\"strict\":false}}", "init.strict");
}

Test(spec, data_test_alone_evaluates_only_at_the_end)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse("{\"data\":{\"train\":\"d/part*.csv\",\"test\":\"s3://b/test/part*.csv\"},"
                       "\"iterations\":50}", &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_str_eq(s->data.test, "s3://b/test/part*.csv");
    cr_expect_eq(s->eval_every, 0);
    spec_free(s);
}

Test(spec, without_data_test_it_is_null_and_eval_every_0)
{
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"eval_every\":0}", &s, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_null(s->data.test);
    json_t *j = spec_to_json(s);
    cr_assert_not_null(j);
    cr_expect(json_is_null(json_object_get(json_object_get(j, "data"), "test")));
    cr_expect_eq(json_integer_value(json_object_get(j, "eval_every")), 0);
    json_decref(j);
    spec_free(s);
}

Test(spec, normalized_spec_with_data_test_parses_again_to_the_same)
{
    struct job_spec *s, *again;
    struct spec_error se;
    cr_assert_eq(parse("{\"data\":{\"train\":\"d/part*.csv\",\"test\":\"t.csv\"},\"iterations\":5,"
                       "\"eval_every\":2}", &s, &se), 0);
    json_t *j = spec_to_json(s);
    cr_assert_not_null(j);
    cr_assert_eq(spec_parse(j, &again, &se), 0, "%s: %s", se.field, se.message);
    cr_expect_str_eq(again->data.test, "t.csv");
    cr_expect_eq(again->eval_every, 2);
    json_decref(j);
    spec_free(again);
    spec_free(s);
}

Test(spec, eval_every_without_data_test_is_rejected)
{
    struct job_spec *s = NULL;
    struct spec_error se;
    cr_assert_eq(parse(MINIMAL ",\"eval_every\":10}", &s, &se), -1);
    cr_expect_str_eq(se.field, "eval_every");
    cr_expect_not_null(strstr(se.message, "data.test"), "%s", se.message);
}

Test(spec, negative_eval_every_is_rejected)
{
    expect_rejected("{\"data\":{\"train\":\"d.csv\",\"test\":\"t.csv\"},\"iterations\":5,\"eval_every\":-1}",
                    "eval_every");
}

Test(spec, eval_every_above_a_billion_is_rejected)
{
    expect_rejected("{\"data\":{\"train\":\"d.csv\",\"test\":\"t.csv\"},\"iterations\":5,"
                    "\"eval_every\":1000000001}", "eval_every");
}

Test(spec, fractional_eval_every_is_rejected)
{
    expect_rejected("{\"data\":{\"train\":\"d.csv\",\"test\":\"t.csv\"},\"iterations\":5,\"eval_every\":2.5}",
                    "eval_every");
}

Test(spec, empty_test_url_is_rejected)
{
    expect_rejected("{\"data\":{\"train\":\"d.csv\",\"test\":\"\"},\"iterations\":5}", "data.test");
}

Test(spec, test_url_that_is_not_a_string_is_rejected)
{
    expect_rejected("{\"data\":{\"train\":\"d.csv\",\"test\":[\"t.csv\"]},\"iterations\":5}", "data.test");
}

Test(spec, credentials_in_the_test_url_are_refused)
{
    struct job_spec *s = NULL;
    struct spec_error se;
    cr_assert_eq(parse("{\"data\":{\"train\":\"d.csv\",\"test\":\"https://u:hunter2@h/t.csv\"},"
                       "\"iterations\":5}", &s, &se), -1);
    cr_expect_str_eq(se.field, "data.test");
    cr_expect_null(strstr(se.message, "hunter2"), "%s", se.message);
}
