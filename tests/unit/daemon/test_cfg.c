/* test_cfg.c — command-line flags, their environment twins, and the defaults. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg.h"

static int parse(char **argv, struct cfg *c, enum cfg_action *a, struct err *e)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    return cfg_parse(argc, argv, c, a, e);
}

Test(cfg, defaults_listen_on_loopback_8470_with_no_data_root)
{
    char *argv[] = {"traind", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(a, CFG_RUN);
    cr_expect_str_eq(c.listen, "127.0.0.1:8470");
    cr_expect_eq(c.cpu_workers, 1);
    cr_expect_eq(c.log_level, LOG_INFO);
    cr_expect_eq(c.n_data_roots, 0, "no data root unless one is given");
    cfg_free(&c);
}

Test(cfg, flags_are_read)
{
    char *argv[] = {"traind", "--listen", "[::1]:0", "--data-root", "/tmp", "--data-root", "/",
                    "--cpu-workers", "3", "--log-level", "debug", "--port-file", "/tmp/p", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_str_eq(c.listen, "[::1]:0");
    cr_assert_eq(c.n_data_roots, 2);
    cr_expect_str_eq(c.data_roots[1], "/");
    cr_expect_eq(c.cpu_workers, 3);
    cr_expect_eq(c.log_level, LOG_DEBUG);
    cr_expect_str_eq(c.port_file, "/tmp/p");
    cfg_free(&c);
}

Test(cfg, environment_is_read_and_flags_win_over_it)
{
    setenv("TRAIND_LISTEN", "127.0.0.1:9000", 1);
    setenv("TRAIND_CPU_WORKERS", "2", 1);
    setenv("TRAIND_DATA_ROOT", "/tmp:/", 1);
    char *argv[] = {"traind", "--cpu-workers", "4", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_str_eq(c.listen, "127.0.0.1:9000");
    cr_expect_eq(c.cpu_workers, 4);
    cr_expect_eq(c.n_data_roots, 2);
    cfg_free(&c);
}

Test(cfg, unknown_flag_is_an_error)
{
    char *argv[] = {"traind", "--bogus", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_neq(parse(argv, &c, &a, &e), 0);
    cr_expect_not_null(strstr(e.msg, "--bogus"), "%s", e.msg);
}

Test(cfg, zero_cpu_workers_is_an_error)
{
    char *argv[] = {"traind", "--cpu-workers", "0", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_neq(parse(argv, &c, &a, &e), 0);
}

Test(cfg, missing_data_root_is_an_error)
{
    char *argv[] = {"traind", "--data-root", "/no/such/dir/anywhere", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_neq(parse(argv, &c, &a, &e), 0);
    cr_expect_not_null(strstr(e.msg, "/no/such/dir/anywhere"), "%s", e.msg);
}

Test(cfg, help_and_version_are_actions)
{
    char *h[] = {"traind", "--help", NULL};
    char *v[] = {"traind", "--version", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(h, &c, &a, &e), 0);
    cr_expect_eq(a, CFG_HELP);
    cfg_free(&c);
    cr_assert_eq(parse(v, &c, &a, &e), 0);
    cr_expect_eq(a, CFG_VERSION);
    cfg_free(&c);
}

Test(cfg, listen_without_a_port_is_an_error)
{
    char *argv[] = {"traind", "--listen", "127.0.0.1", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_neq(parse(argv, &c, &a, &e), 0);
    cr_expect_not_null(strstr(e.msg, "HOST:PORT"), "%s", e.msg);
}

Test(cfg, token_file_timeout_and_cache_limit_are_read)
{
    char *argv[] = {"traind", "--token-file", "/etc/traind/token", "--request-timeout", "5",
                    "--cache-dir", "/var/cache/traind", "--cache-limit", "20G", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_str_eq(c.token_file, "/etc/traind/token");
    cr_expect_eq(c.request_timeout_s, 5);
    cr_expect_str_eq(c.cache_dir, "/var/cache/traind");
    cr_expect_eq(c.cache_limit, 20ULL << 30);
    cfg_free(&c);
}

Test(cfg, a_bad_cache_limit_or_timeout_is_an_error)
{
    char *bad_limit[] = {"traind", "--cache-limit", "lots", NULL};
    char *bad_timeout[] = {"traind", "--request-timeout", "0", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_expect_neq(parse(bad_limit, &c, &a, &e), 0);
    cr_expect_not_null(strstr(e.msg, "--cache-limit"), "%s", e.msg);
    cr_expect_neq(parse(bad_timeout, &c, &a, &e), 0);
    cr_expect_not_null(strstr(e.msg, "--request-timeout"), "%s", e.msg);
}

Test(cfg, http_timeout_is_the_older_name_of_request_timeout)
{
    char *argv[] = {"traind", "--http-timeout", "7", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(c.request_timeout_s, 7);
    cfg_free(&c);
}

Test(cfg, predict_max_rows_defaults_to_100000_and_is_read)
{
    char *plain[] = {"traind", NULL};
    char *argv[] = {"traind", "--predict-max-rows", "25", NULL};
    char *bad[] = {"traind", "--predict-max-rows", "0", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(plain, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(c.predict_max_rows, 100000);
    cfg_free(&c);
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(c.predict_max_rows, 25);
    cfg_free(&c);
    cr_expect_neq(parse(bad, &c, &a, &e), 0);
    cr_expect_not_null(strstr(e.msg, "--predict-max-rows"), "%s", e.msg);
}

Test(cfg, allreduce_timeout_defaults_to_300_s_and_is_read)
{
    char *plain[] = {"traind", NULL};
    char *argv[] = {"traind", "--allreduce-timeout", "45", NULL};
    char *bad[] = {"traind", "--allreduce-timeout", "0", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(plain, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(c.allreduce_timeout_s, 300);
    cfg_free(&c);
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(c.allreduce_timeout_s, 45);
    cfg_free(&c);
    cr_expect_neq(parse(bad, &c, &a, &e), 0);
    cr_expect_not_null(strstr(e.msg, "--allreduce-timeout"), "%s", e.msg);
}

Test(cfg, devices_is_a_command)
{
    char *argv[] = {"traind", "devices", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(a, CFG_DEVICES);
    cfg_free(&c);
}

Test(cfg, spec_schema_is_a_command)
{
    char *argv[] = {"traind", "spec-schema", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(a, CFG_SPEC_SCHEMA);
    cfg_free(&c);
}

Test(cfg, bench_add_is_a_command)
{
    char *argv[] = {"traind", "bench", "add", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(a, CFG_BENCH_ADD);
    cfg_free(&c);
}

Test(cfg, bench_without_a_benchmark_name_is_refused)
{
    char *argv[] = {"traind", "bench", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_expect_eq(parse(argv, &c, &a, &e), ERR_INVALID_ARG);
    cr_expect(strstr(e.msg, "bench") != NULL, "%s", e.msg);
}

Test(cfg, every_gpu_is_used_by_default)
{
    char *argv[] = {"traind", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect(cfg_uses_gpu(&c, 0));
    cr_expect(cfg_uses_gpu(&c, 63));
    cr_expect_not(cfg_uses_gpu(&c, 64));
    cfg_free(&c);
}

Test(cfg, gpus_names_the_gpus_traind_uses)
{
    char *argv[] = {"traind", "--gpus", "0,2,63", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect(cfg_uses_gpu(&c, 0));
    cr_expect_not(cfg_uses_gpu(&c, 1));
    cr_expect(cfg_uses_gpu(&c, 2));
    cr_expect_not(cfg_uses_gpu(&c, 3));
    cr_expect(cfg_uses_gpu(&c, 63));
    cfg_free(&c);
}

Test(cfg, gpus_none_and_all_are_words)
{
    char *none[] = {"traind", "--gpus", "none", NULL};
    char *all[] = {"traind", "--gpus", "all", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(none, &c, &a, &e), 0, "%s", e.msg);
    for (int i = 0; i <= CFG_MAX_GPU_INDEX; i++)
        cr_expect_not(cfg_uses_gpu(&c, i), "--gpus none uses cuda:%d", i);
    cfg_free(&c);
    cr_assert_eq(parse(all, &c, &a, &e), 0, "%s", e.msg);
    cr_expect(cfg_uses_gpu(&c, 5));
    cfg_free(&c);
}

Test(cfg, gpus_is_read_from_the_environment_and_the_flag_wins)
{
    setenv("TRAIND_GPUS", "1", 1);
    char *env_only[] = {"traind", NULL};
    char *flag[] = {"traind", "--gpus", "none", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(env_only, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_not(cfg_uses_gpu(&c, 0));
    cr_expect(cfg_uses_gpu(&c, 1));
    cfg_free(&c);
    cr_assert_eq(parse(flag, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_not(cfg_uses_gpu(&c, 1));
    cfg_free(&c);
    setenv("TRAIND_GPUS", "x", 1);
    cr_expect_eq(parse(env_only, &c, &a, &e), ERR_INVALID_ARG);
    cr_expect(strstr(e.msg, "TRAIND_GPUS") != NULL, "%s", e.msg);
    unsetenv("TRAIND_GPUS");
}

Test(cfg, a_bad_gpus_list_is_an_error)
{
    const char *bad[] = {"", "1,", ",1", "1,,2", "64", "-1", "cuda:0", "0 1", "1,1", "some"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"traind", "--gpus", (char *)bad[i], NULL};
        struct cfg c;
        enum cfg_action a;
        struct err e = {0};
        cr_expect_eq(parse(argv, &c, &a, &e), ERR_INVALID_ARG, "--gpus '%s' accepted", bad[i]);
        cr_expect(strstr(e.msg, "--gpus") != NULL, "%s", e.msg);
    }
}

Test(cfg, s3_endpoint_is_repeatable_and_only_named_endpoints_are_allowed)
{
    unsetenv("AWS_ENDPOINT_URL");
    char *argv[] = {"traind", "--s3-endpoint", "http://127.0.0.1:9000", "--s3-endpoint", "https://s3.example.net/",
                    NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_assert_eq(c.n_s3_endpoints, 2);
    cr_expect(cfg_s3_endpoint_allowed(&c, "http://127.0.0.1:9000"));
    cr_expect(cfg_s3_endpoint_allowed(&c, "http://127.0.0.1:9000/"));
    cr_expect(cfg_s3_endpoint_allowed(&c, "https://s3.example.net"));
    cr_expect(!cfg_s3_endpoint_allowed(&c, "http://127.0.0.1:9001"));
    cr_expect(!cfg_s3_endpoint_allowed(&c, "http://127.0.0.1:9000.evil.example"));
    cr_expect(!cfg_s3_endpoint_allowed(&c, "https://127.0.0.1:9000"));
    cfg_free(&c);
}

Test(cfg, the_daemons_aws_endpoint_url_is_allowed_without_a_flag)
{
    setenv("AWS_ENDPOINT_URL", "http://minio.local:9000", 1);
    char *argv[] = {"traind", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(c.n_s3_endpoints, 0);
    cr_expect(cfg_s3_endpoint_allowed(&c, "http://minio.local:9000"));
    cr_expect(!cfg_s3_endpoint_allowed(&c, "http://attacker.example:9000"));
    cfg_free(&c);
}

Test(cfg, s3_endpoints_are_read_from_the_environment_and_flags_replace_them)
{
    unsetenv("AWS_ENDPOINT_URL");
    setenv("TRAIND_S3_ENDPOINT", "http://a:9000,http://b:9000", 1);
    char *none[] = {"traind", NULL};
    char *flag[] = {"traind", "--s3-endpoint", "http://c:9000", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(none, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(c.n_s3_endpoints, 2);
    cr_expect(cfg_s3_endpoint_allowed(&c, "http://b:9000"));
    cfg_free(&c);
    cr_assert_eq(parse(flag, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(c.n_s3_endpoints, 1);
    cr_expect(!cfg_s3_endpoint_allowed(&c, "http://b:9000"));
    cfg_free(&c);
}

Test(cfg, an_s3_endpoint_that_is_not_an_http_url_is_an_error)
{
    char *argv[] = {"traind", "--s3-endpoint", "s3.example.net", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), ERR_INVALID_ARG);
    cr_expect_not_null(strstr(e.msg, "--s3-endpoint"), "%s", e.msg);
}

/* cfg_check_state_dir's message for argv, or NULL when it lets it start (a static buffer). */
static const char *state_dir_refusal(char **argv)
{
    static struct err e;
    memset(&e, 0, sizeof e);
    struct cfg c;
    enum cfg_action a;
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    int rc = cfg_check_state_dir(&c, &e);
    cfg_free(&c);
    if (rc)
        cr_expect_eq(rc, ERR_INVALID_ARG);
    return rc ? e.msg : NULL;
}

/* The working directory holds the default state dir: given as the data root, traind refuses it. */
Test(cfg, the_working_directory_as_data_root_holds_the_default_state_dir_so_traind_refuses_it)
{
    char *argv[] = {"traind", "--data-root", ".", NULL};
    const char *msg = state_dir_refusal(argv);
    cr_assert_not_null(msg, "the working directory, state dir inside it, was let through");
    cr_expect_not_null(strstr(msg, "holds the state directory"), "%s", msg);
    cr_expect_not_null(strstr(msg, "/traind-state"), "%s", msg);
    cr_expect_not_null(strstr(msg, "--data-root"), "it says what to do: %s", msg);
}

/* With no data root (the default) there is nothing to refuse: traind starts, reading no local files. */
Test(cfg, the_defaults_start)
{
    char *argv[] = {"traind", NULL};
    const char *msg = state_dir_refusal(argv);
    cr_expect_null(msg, "%s", msg);
}

Test(cfg, a_data_root_that_is_the_state_dir_or_lies_inside_it_is_refused)
{
    char *same[] = {"traind", "--data-root", "/tmp", "--state-dir", "/tmp/", NULL};
    const char *msg = state_dir_refusal(same);
    cr_assert_not_null(msg);
    cr_expect_not_null(strstr(msg, "/tmp is the state directory"), "%s", msg);
    /* /tmp/x/y does not exist yet: it is judged by where it would be made. */
    char *inside[] = {"traind", "--data-root", "/tmp", "--state-dir", "/tmp/../tmp/x/y", NULL};
    msg = state_dir_refusal(inside);
    cr_assert_not_null(msg);
    cr_expect_not_null(strstr(msg, "holds the state directory /tmp/x/y"), "%s", msg);
    char *under[] = {"traind", "--data-root", "/tmp", "--state-dir", "/", NULL};
    msg = state_dir_refusal(under);
    cr_assert_not_null(msg);
    cr_expect_not_null(strstr(msg, "is inside the state directory /"), "%s", msg);
}

Test(cfg, a_state_dir_beside_the_data_roots_is_let_through)
{
    char *argv[] = {"traind", "--data-root", "/tmp", "--state-dir", "/tmpfoo/state", NULL};
    cr_expect_null(state_dir_refusal(argv), "/tmpfoo is not below /tmp");
}

Test(cfg, byte_limits_take_suffixes_and_refuse_zero)
{
    char *argv[] = {"traind", "--response-memory-max", "1M", "--list-max-keys", "10", NULL};
    struct cfg c;
    enum cfg_action a;
    struct err e = {0};
    cr_assert_eq(parse(argv, &c, &a, &e), 0, "%s", e.msg);
    cr_expect_eq(c.response_memory_max, 1048576);
    cr_expect_eq(c.list_max_keys, 10);
    cr_expect_eq(c.model_max_bytes, 4ULL << 30, "the default");
    cfg_free(&c);
    char *zero[] = {"traind", "--model-max-bytes", "0", NULL};
    cr_expect_neq(parse(zero, &c, &a, &e), 0);
    cr_expect_not_null(strstr(e.msg, "--model-max-bytes"), "%s", e.msg);
}
