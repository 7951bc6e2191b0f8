/* test_epochs.c — epochs instead of iterations, and init {"from": ...}, through the real traind,
 * against PyTorch's DataLoader loop (make_epochs_fixture.py wrote epochs_torch.txt). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"
#include "test_servers.h"

static struct daemon_proc D;

static void setup(void)
{
    cr_assert(daemon_start(&D), "traind did not start (see its log under /tmp/traind-it-*)");
}

static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(epochs, .init = setup, .fini = teardown, .timeout = 240);

/* The fixture's data: 2000 rows in 3 partitions; batches of 300 make 7 an epoch (6 with drop_last). */
#define ROWS 2000
#define BATCH 300

/* The reference's linear job for `epochs` epochs, with more members (e.g. "\"seed\":0"; may be ""). */
static const char *epochs_spec_data(const char *train, const char *data_more, int epochs, int batch,
                                    const char *more)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"data\":{\"train\":\"%s\"%s},\"model\":{\"type\":\"linear\"},\"loss\":\"mse\","
             "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.03},\"clip_grad_norm\":0.5,"
             "\"batch_size\":%d,\"epochs\":%d,\"dtype\":\"float64\",\"seed\":0%s%s}",
             train, data_more, batch, epochs, *more ? "," : "", more);
    return buf;
}

static const char *epochs_spec(const char *train, int epochs, int batch, const char *more)
{
    return epochs_spec_data(train, "", epochs, batch, more);
}

/* PyTorch's record `name` of epochs_torch.txt; its count in *n. */
static double *torch_record(const char *name, int *n)
{
    FILE *f = fopen(EPOCHS_FIXTURES "/epochs_torch.txt", "r");
    cr_assert_not_null(f, "cannot open %s/epochs_torch.txt", EPOCHS_FIXTURES);
    char got[64];
    int count;
    while (fscanf(f, "%63s %d", got, &count) == 2) {
        double *v = malloc((size_t)count * sizeof *v);
        cr_assert_not_null(v);
        for (int i = 0; i < count; i++)
            cr_assert_eq(fscanf(f, "%lf", &v[i]), 1);
        if (strcmp(got, name) == 0) {
            fclose(f);
            *n = count;
            return v;
        }
        free(v);
    }
    fclose(f);
    cr_assert_fail("no record %s in epochs_torch.txt", name);
    return NULL;
}

/* A job's metrics rows, asserting there are n, numbered 0 .. n-1. */
static json_t *rows_of(const char *id, size_t n)
{
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/metrics?limit=100000", id);
    json_t *m = get_json(&D, path, 200);
    json_t *rows = json_incref(json_object_get(m, "rows"));
    json_decref(m);
    cr_assert_eq(json_array_size(rows), n, "job %s has %zu metrics rows, not %zu", id, json_array_size(rows), n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(json_integer_value(json_array_get(json_array_get(rows, i), 0)), (json_int_t)i,
                     "row %zu is not iteration %zu", i, i);
    return rows;
}

static double loss_at(json_t *rows, size_t i)
{
    return json_number_value(json_array_get(json_array_get(rows, i), 2));
}

/* The job's losses equal PyTorch's record, row for row, to 1e-9 relative. */
static void expect_torch(const char *id, const char *record)
{
    int n;
    double *want = torch_record(record, &n);
    json_t *rows = rows_of(id, (size_t)n);
    for (int i = 0; i < n; i++)
        cr_expect(fabs(loss_at(rows, (size_t)i) - want[i]) <= 1e-9 * fabs(want[i]),
                  "%s at iteration %d: %.17g, PyTorch %.17g", record, i, loss_at(rows, (size_t)i), want[i]);
    json_decref(rows);
    free(want);
}

static json_t *succeeded(const char *id)
{
    json_t *job = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "job %s: %s", id,
                     json_string_value(json_object_get(json_object_get(job, "error"), "message")));
    return job;
}

static const char *dev_data(void)
{
    static char train[512];
    cr_assert(gen_dctaxi(&D, "dev", ROWS, 3));
    snprintf(train, sizeof train, "file://%s/dev/part*.csv", D.dir);
    return train;
}

static json_int_t progress_int(json_t *job, const char *key)
{
    return json_integer_value(json_object_get(json_object_get(job, "progress"), key));
}

Test(epochs, three_epochs_are_3_ceil_n_over_b_iterations_with_pytorchs_losses)
{
    char id[64];
    submit_job(&D, epochs_spec(dev_data(), 3, BATCH, ""), id, sizeof id);
    json_t *job = succeeded(id);
    expect_torch(id, "epochs3");   /* 21 rows: 7 an epoch, the last of 200 rows */
    cr_expect_eq(progress_int(job, "iteration"), 21);
    cr_expect_eq(progress_int(job, "iterations"), 21);
    cr_expect_eq(progress_int(job, "epoch"), 3, "the data cursor has done 3 epochs");
    cr_expect_eq(progress_int(job, "epochs"), 3);
    cr_expect_eq(json_real_value(json_object_get(json_object_get(job, "progress"), "fraction")), 1.0);
    cr_expect(json_is_null(json_object_get(json_object_get(job, "spec"), "iterations")));
    json_decref(job);
}

Test(epochs, with_drop_last_three_epochs_are_3_floor_n_over_b_iterations_with_pytorchs_losses)
{
    char id[64];
    submit_job(&D, epochs_spec_data(dev_data(), ",\"drop_last\":true", 3, BATCH, ""), id, sizeof id);
    json_t *job = succeeded(id);
    expect_torch(id, "epochs3_drop_last");   /* 18 rows */
    cr_expect_eq(progress_int(job, "iterations"), 18);
    json_decref(job);
}

/* Polls until the running job shows its total; returns the job object. */
static json_t *wait_total(const char *id)
{
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s", id);
    for (double t0 = now_s(); now_s() - t0 < 60;) {
        json_t *job = get_json(&D, path, 200);
        if (json_is_integer(json_object_get(json_object_get(job, "progress"), "iterations")))
            return job;
        const char *st = json_string_value(json_object_get(job, "state"));
        cr_assert_str_eq(st, "running", "job %s is %s before its total was shown", id, st);
        json_decref(job);
        usleep(20 * 1000);
    }
    cr_assert_fail("job %s never showed its total", id);
    return NULL;
}

static void cancel(const char *id)
{
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s/cancel", id);
    struct http_reply r;
    cr_assert(http(&D, "POST", path, NULL, NULL, &r));
    http_reply_free(&r);
    json_decref(wait_job_done(&D, id, 60));
}

Test(epochs, a_running_job_shows_its_total_and_fraction_once_the_epoch_length_is_known)
{
    char id[64];
    submit_job(&D, epochs_spec(dev_data(), 5000, 64, ""), id, sizeof id);   /* 32 batches an epoch */
    json_t *job = wait_total(id);
    json_t *p = json_object_get(job, "progress");
    cr_expect_eq(json_integer_value(json_object_get(p, "iterations")), 5000 * 32);
    cr_expect_eq(json_integer_value(json_object_get(p, "epochs")), 5000);
    cr_expect(json_is_real(json_object_get(p, "fraction")));
    cr_expect_lt(json_real_value(json_object_get(p, "fraction")), 1.0);
    json_int_t it = json_integer_value(json_object_get(p, "iteration"));
    cr_expect_eq((json_int_t)json_integer_value(json_object_get(p, "epoch")), it / 32,
                 "epoch %lld after %lld iterations of 32 an epoch",
                 (long long)json_integer_value(json_object_get(p, "epoch")), (long long)it);
    json_decref(job);
    cancel(id);
}

Test(epochs, after_sigkill_an_epochs_job_stops_at_an_uninterrupted_runs_total_with_its_losses)
{
    enum { EPOCHS = 300, PER_EPOCH = 47, N = EPOCHS * PER_EPOCH };   /* 3000 rows, batches of 64 */
    cr_assert(gen_dctaxi(&D, "big", 3000, 2));
    char train[512], id[64], twin[64], line[256];
    snprintf(train, sizeof train, "%s/big/part*.csv", D.dir);
    submit_job(&D, epochs_spec(train, EPOCHS, 64, "\"checkpoint_every\":1000"), id, sizeof id);
    wait_job_iterations(&D, id, 2500);

    daemon_kill(&D);
    cr_assert(daemon_spawn(&D, NULL), "traind did not start after SIGKILL");
    snprintf(line, sizeof line, "job %s was running when traind last stopped", id);
    cr_assert(daemon_log_contains(&D, line), "the job had ended before SIGKILL; nothing was tested");
    snprintf(line, sizeof line, "job %s was running when traind last stopped without a shutdown; it goes "
             "on from iteration 0", id);
    cr_expect(!daemon_log_contains(&D, line), "it starts over rather than going on from its checkpoint");

    submit_job(&D, epochs_spec(train, EPOCHS, 64, ""), twin, sizeof twin);
    json_t *job = succeeded(id);
    cr_expect_eq(progress_int(job, "iterations"), N);
    cr_expect_eq(progress_int(job, "epoch"), EPOCHS);
    json_decref(job);
    json_decref(succeeded(twin));
    json_t *resumed = rows_of(id, N), *reference = rows_of(twin, N);
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(loss_at(resumed, i), loss_at(reference, i),
                     "iteration %zu: %.17g after the restart, %.17g uninterrupted", i, loss_at(resumed, i),
                     loss_at(reference, i));
    json_decref(resumed);
    json_decref(reference);
}

Test(epochs, after_sigterm_an_epochs_job_goes_on_to_an_uninterrupted_runs_total)
{
    enum { EPOCHS = 400, PER_EPOCH = 47, N = EPOCHS * PER_EPOCH };
    cr_assert(gen_dctaxi(&D, "big", 3000, 2));
    char train[512], id[64];
    snprintf(train, sizeof train, "%s/big/part*.csv", D.dir);
    submit_job(&D, epochs_spec(train, EPOCHS, 64, ""), id, sizeof id);
    wait_job_iterations(&D, id, 100);
    int status = daemon_stop(&D, 30);
    cr_assert_eq(status, 0, "traind exited with %d on SIGTERM", status);
    char line[128];
    snprintf(line, sizeof line, "job %s stopped for shutdown", id);
    cr_assert(daemon_log_contains(&D, line), "the job had ended before SIGTERM; nothing was tested");
    cr_assert(daemon_spawn(&D, NULL), "traind did not start again");
    json_t *job = succeeded(id);
    cr_expect_eq(progress_int(job, "iteration"), N);
    cr_expect_eq(progress_int(job, "iterations"), N);
    json_decref(job);
    json_decref(rows_of(id, N));
}

Test(epochs, init_from_a_job_starts_from_its_final_parameters_with_a_fresh_optimizer)
{
    char a[64], b[64], more[128];
    const char *train = dev_data();
    submit_job(&D, epochs_spec(train, 3, BATCH, ""), a, sizeof a);
    json_decref(succeeded(a));
    snprintf(more, sizeof more, "\"init\":{\"from\":\"%s\"}", a);
    char spec[2048];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s\"},\"optimizer\":{\"type\":\"adam\",\"lr\":0.1},"
             "\"batch_size\":%d,\"epochs\":1,\"dtype\":\"float64\",%s}", train, BATCH, more);
    submit_job(&D, spec, b, sizeof b);
    json_t *job = succeeded(b);
    expect_torch(b, "from_job");   /* its first loss is A's final parameters on batch 0 */
    cr_expect_eq(progress_int(job, "iteration"), 7, "a fresh start at iteration 0, not A's 21");
    json_t *from = json_object_get(json_object_get(json_object_get(job, "spec"), "init"), "from");
    cr_expect_str_eq(json_string_value(from), a);
    json_decref(job);
}

Test(epochs, init_from_a_safetensors_file_of_an_independent_writer_loads_float32_into_float64)
{
    char id[64], more[700], cmd[1200];
    const char *train = dev_data();
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/models' && cp '%s/init_linear.safetensors' '%s/models/'", D.dir,
             EPOCHS_FIXTURES, D.dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(more, sizeof more, "\"init\":{\"from\":\"file://%s/models/init_linear.safetensors\"}", D.dir);
    submit_job(&D, epochs_spec(train, 1, BATCH, more), id, sizeof id);
    json_decref(succeeded(id));
    expect_torch(id, "from_file");
}

/* The whole file at path, for the server below. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    char *buf = malloc(1 << 16);
    cr_assert_not_null(buf);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

/* A child process answering every GET or HEAD on 127.0.0.1 with body; returns its pid and *port. */
static pid_t serve_forever(const char *body, size_t len, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 8) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid > 0) {
        close(fd);
        return pid;
    }
    for (;;) {
        int c = accept(fd, NULL, NULL);
        char req[4096];
        size_t n = 0;
        ssize_t got;
        while (c >= 0 && n < sizeof req - 1 && (got = read(c, req + n, sizeof req - 1 - n)) > 0) {
            n += (size_t)got;
            req[n] = '\0';
            if (strstr(req, "\r\n\r\n"))
                break;
        }
        char head[160];
        int hl = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n"
                          "ETag: \"v1\"\r\nConnection: close\r\n\r\n", len);
        if (c >= 0 && write(c, head, (size_t)hl) == hl && strncmp(req, "HEAD", 4) != 0 &&
            write(c, body, len) != (ssize_t)len)
            _exit(1);
        if (c >= 0)
            close(c);
    }
}

Test(epochs, init_from_an_http_url_loads_the_file_it_serves)
{
    char id[64], more[256];
    const char *train = dev_data();
    size_t len;
    char *body = slurp(EPOCHS_FIXTURES "/init_linear.safetensors", &len);
    int port;
    pid_t server = serve_forever(body, len, &port);
    free(body);
    snprintf(more, sizeof more, "\"init\":{\"from\":\"http://127.0.0.1:%d/m/init_linear.safetensors\"}", port);
    submit_job(&D, epochs_spec(train, 1, BATCH, more), id, sizeof id);
    json_t *job = wait_job_done(&D, id, 60);
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(job, "error"), "message")));
    json_decref(job);
    expect_torch(id, "from_file");
}

/* The same file as an object of s3rver on loopback, read with the spec's data.endpoint (unsigned), which
   the daemon, started again, is told it may use. */
Test(epochs, init_from_an_s3_url_loads_the_object)
{
    struct test_server s3 = {0};
    cr_assert(test_server_tmpdir(&s3));
    char dir[512], put[1024];
    snprintf(dir, sizeof dir, "%s/s3", s3.tmp);
    snprintf(put, sizeof put, "models/m/init_linear.safetensors=%s/init_linear.safetensors", EPOCHS_FIXTURES);
    const char *args[] = {"--dir", dir, "--bucket", "models", "--put", put, NULL};
    TEST_SERVER_START_OR_SKIP(&s3, "s3.js", args);
    char id[64], data_more[128], endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", s3.port);
    const char *flags[] = {"--s3-endpoint", endpoint, NULL};
    cr_assert_eq(daemon_stop(&D, 20), 0);
    cr_assert(daemon_spawn(&D, flags), "traind did not start again");
    const char *train = dev_data();
    snprintf(data_more, sizeof data_more, ",\"endpoint\":\"%s\",\"anonymous\":true", endpoint);
    submit_job(&D, epochs_spec_data(train, data_more, 1, BATCH,
                                    "\"init\":{\"from\":\"s3://models/m/init_linear.safetensors\"}"),
               id, sizeof id);
    json_t *job = wait_job_done(&D, id, 60);
    test_server_stop(&s3);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(job, "error"), "message")));
    json_decref(job);
    expect_torch(id, "from_file");
}

static json_t *failed(const char *id)
{
    json_t *job = wait_job_done(&D, id, 60);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "failed");
    return job;
}

Test(epochs, init_from_a_job_of_another_shape_fails_naming_the_tensor_and_both_shapes)
{
    char a[64], b[64], more[128];
    const char *train = dev_data();
    char spec[2048];
    snprintf(spec, sizeof spec, "{\"data\":{\"train\":\"%s\"},\"model\":{\"type\":\"mlp\",\"hidden\":[4]},"
             "\"batch_size\":%d,\"epochs\":1}", train, BATCH);
    submit_job(&D, spec, a, sizeof a);
    json_decref(succeeded(a));
    snprintf(more, sizeof more, "\"init\":{\"from\":\"%s\"}", a);
    snprintf(spec, sizeof spec, "{\"data\":{\"train\":\"%s\"},\"model\":{\"type\":\"mlp\",\"hidden\":[5]},"
             "\"batch_size\":%d,\"epochs\":1,%s}", train, BATCH, more);
    submit_job(&D, spec, b, sizeof b);
    json_t *job = failed(b);
    json_t *err = json_object_get(job, "error");
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "invalid_spec");
    cr_expect(msg && strstr(msg, "size mismatch for 0.weight") && strstr(msg, "(4, 8)") && strstr(msg, "(5, 8)"),
              "%s", msg);
    json_decref(job);
}

/* As a data URL outside the roots: auth_failed, whether the file is there or not. */
Test(epochs, init_from_a_file_outside_the_data_roots_fails_the_job)
{
    char id[64];
    submit_job(&D, epochs_spec(dev_data(), 1, BATCH, "\"init\":{\"from\":\"/etc/w.safetensors\"}"), id, sizeof id);
    json_t *job = failed(id);
    const char *code = json_string_value(json_object_get(json_object_get(job, "error"), "code"));
    cr_expect_str_eq(code, "auth_failed");
    json_decref(job);
}

/* POSTs spec and expects 400 invalid_spec for field init.from, with `words` in the message. */
static void expect_refused(const char *spec, const char *words)
{
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", spec, &r));
    cr_expect_eq(r.status, 400, "%s", r.body);
    json_t *err = json_object_get(r.json, "error");
    cr_expect_str_eq(reply_error_code(&r), "invalid_spec");
    cr_expect_str_eq(json_string_value(json_object_get(err, "field")), "init.from");
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_expect(msg && strstr(msg, words), "'%s' not in %s", words, msg);
    http_reply_free(&r);
}

Test(epochs, init_from_an_unknown_job_or_one_without_a_checkpoint_is_refused_at_submit)
{
    const char *train = dev_data();
    expect_refused(epochs_spec(train, 1, BATCH, "\"init\":{\"from\":\"00000000deadbeef\"}"), "no job has this id");
    char id[64], more[128];
    submit_job(&D, baseline_spec("missing/part*.csv", 1, 1), id, sizeof id);
    json_decref(failed(id));
    snprintf(more, sizeof more, "\"init\":{\"from\":\"%s\"}", id);
    expect_refused(epochs_spec(train, 1, BATCH, more), "no checkpoint");
}

Test(epochs, a_finished_epochs_jobs_progress_is_the_same_after_a_restart)
{
    char id[64], path[128];
    submit_job(&D, epochs_spec(dev_data(), 2, BATCH, ""), id, sizeof id);
    json_t *before = succeeded(id);
    int status = daemon_stop(&D, 30);
    cr_assert_eq(status, 0, "traind exited with %d on SIGTERM", status);
    cr_assert(daemon_spawn(&D, NULL), "traind did not start again");
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *after = get_json(&D, path, 200);
    json_t *p = json_object_get(after, "progress");
    cr_expect(json_equal(json_object_get(before, "progress"), p), "progress changed across a restart");
    cr_expect_eq(json_integer_value(json_object_get(p, "iterations")), 14);
    cr_expect_eq(json_integer_value(json_object_get(p, "epoch")), 2);
    json_decref(before);
    json_decref(after);
}

/* Writes text (may be "") to D.dir/sub/name, or copies D.dir/from into it when text is NULL. */
static void put_file(const char *sub, const char *name, const char *text, const char *from)
{
    char path[512], src[512];
    snprintf(path, sizeof path, "%s/%s/%s", D.dir, sub, name);
    FILE *out = fopen(path, "w");
    cr_assert_not_null(out, "cannot write %s", path);
    if (text) {
        fputs(text, out);
    } else {
        snprintf(src, sizeof src, "%s/%s", D.dir, from);
        FILE *in = fopen(src, "r");
        cr_assert_not_null(in, "cannot read %s", src);
        char buf[8192];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            cr_assert_eq(fwrite(buf, 1, n, out), n);
        fclose(in);
    }
    cr_assert_eq(fclose(out), 0);
}

Test(epochs, empty_partitions_first_between_and_last_leave_the_losses_of_the_data_without_them)
{
    /* dev's three partitions (667, 667 and 666 rows) with empty ones around them; batches of 500 end an
       epoch exactly where the last data ends, just before an empty last partition. */
    const char *train = dev_data();
    char dir[300], gaps[400];
    snprintf(dir, sizeof dir, "%s/gaps", D.dir);
    cr_assert_eq(mkdir(dir, 0755), 0);
    put_file("gaps", "part-00000.csv", "", NULL);
    put_file("gaps", "part-00001.csv", NULL, "dev/part-00000.csv");
    put_file("gaps", "part-00002.csv", "", NULL);
    put_file("gaps", "part-00003.csv", "\n\n", NULL);
    put_file("gaps", "part-00004.csv", NULL, "dev/part-00001.csv");
    put_file("gaps", "part-00005.csv", NULL, "dev/part-00002.csv");
    put_file("gaps", "part-00006.csv", "", NULL);
    snprintf(gaps, sizeof gaps, "file://%s/part*.csv", dir);
    char plain_id[64], gaps_id[64];
    submit_job(&D, epochs_spec(train, 2, 500, ""), plain_id, sizeof plain_id);
    submit_job(&D, epochs_spec(gaps, 2, 500, ""), gaps_id, sizeof gaps_id);
    json_t *plain_job = succeeded(plain_id), *gaps_job = succeeded(gaps_id);
    cr_expect_eq(progress_int(gaps_job, "iterations"), 8, "ceil(2000 / 500) = 4 iterations an epoch");
    cr_expect_eq(progress_int(gaps_job, "epoch"), 2);
    json_t *want = rows_of(plain_id, 8), *got = rows_of(gaps_id, 8);
    for (size_t i = 0; i < 8; i++)
        cr_expect_eq(loss_at(got, i), loss_at(want, i), "iteration %zu: %.17g, without empty partitions %.17g", i,
                     loss_at(got, i), loss_at(want, i));
    json_decref(want);
    json_decref(got);
    json_decref(plain_job);
    json_decref(gaps_job);
}

/* The eval_loss column of a job's metrics rows (n of them): numbers, or null where none was due. */
static json_t *eval_losses(const char *id, size_t n)
{
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/metrics?limit=100000", id);
    json_t *m = get_json(&D, path, 200);
    json_t *cols = json_object_get(m, "columns"), *out = json_array();
    size_t ec = json_array_size(cols);
    for (size_t i = 0; i < json_array_size(cols); i++)
        if (strcmp(json_string_value(json_array_get(cols, i)), "eval_loss") == 0)
            ec = i;
    cr_assert_lt(ec, json_array_size(cols), "no eval_loss column");
    json_t *rows = json_object_get(m, "rows");
    cr_assert_eq(json_array_size(rows), n, "job %s has %zu rows, not %zu", id, json_array_size(rows), n);
    for (size_t i = 0; i < n; i++)
        json_array_append(out, json_array_get(json_array_get(rows, i), ec));
    json_decref(m);
    return out;
}

Test(epochs, with_drop_last_and_no_row_counts_ahead_the_last_iteration_is_evaluated_on_data_test)
{
    /* No shards: the epoch's end is learned from the data, and the last batch must be known as the last
       when its row is written, or data.test's "always after the last iteration" is missed. */
    const char *train = dev_data();
    cr_assert(gen_dctaxi_seed(&D, "test", 500, 2, 1));
    char data_more[600];
    static const char *const shuffles[] = {"", ",\"shuffle\":{\"partitions\":true}",
                                           ",\"shuffle\":{\"partitions\":true,\"buffer\":128}"};
    for (size_t k = 0; k < sizeof shuffles / sizeof *shuffles; k++) {
        snprintf(data_more, sizeof data_more, ",\"drop_last\":true,\"test\":\"file://%s/test/part*.csv\"%s", D.dir,
                 shuffles[k]);
        char id[64];
        submit_job(&D, epochs_spec_data(train, data_more, 2, BATCH, ""), id, sizeof id);
        json_decref(succeeded(id));
        json_t *ev = eval_losses(id, 12);   /* 6 an epoch: 2000 rows in batches of 300, a tail of 200 dropped */
        for (size_t i = 0; i + 1 < 12; i++)
            cr_expect(json_is_null(json_array_get(ev, i)), "%s: eval_loss after iteration %zu", shuffles[k], i);
        cr_expect(json_is_number(json_array_get(ev, 11)), "%s: no eval_loss after the last iteration", shuffles[k]);
        json_decref(ev);
    }
}
