/*
 * test_replicas.c — "replicas" through the real daemon with three CPU workers: a job trained
 * as 2 and 3 data-parallel replicas (3 splits the batches unevenly), with or without a shuffle
 * buffer, reports the losses of the same job as one, and their eval_loss on data.test (each
 * replica evaluating its share of a test batch) is one replica's; paused and resumed it goes
 * on as if never stopped, shows each replica's figures while it runs, and a job asking for
 * more replicas than there are workers, or for several replicas on one named GPU or on CPU
 * and GPUs at once, is refused at submit (tests/integration/test_gpu_replicas.c has replicas
 * on GPUs). Then what goes wrong: a replica made slow (its
 * thread niced and sharing a CPU with a busy thread of the test's) is named a straggler in
 * the job's record; a replica whose thread is frozen (ptrace) ends the run, and the job goes
 * on from its checkpoint on the other workers; a job stored as 3 replicas goes on as 2 when
 * traind comes back with 2 workers. Those three keep the one replica's losses.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"

#define ITERATIONS 24
/* A job long enough to be paused or restarted before it ends, checkpointing at every step. */
#define LONG_ITERATIONS 240

static struct daemon_proc D;

static void setup(void)
{
    memset(&D, 0, sizeof D);
    snprintf(D.dir, sizeof D.dir, "/tmp/traind-it-XXXXXX");
    cr_assert_not_null(mkdtemp(D.dir));
    static const char *const extra[] = {"--cpu-workers", "3", "--gpus", "none", NULL};
    cr_assert(daemon_spawn(&D, extra), "traind did not start (see its log under %s)", D.dir);
    cr_assert(gen_dctaxi(&D, "rep", 700, 3));
}

/* Every test ends with a clean shutdown, so leaks and sanitizer reports in traind fail it. */
static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(replicas, .init = setup, .fini = teardown, .timeout = 240);

static const char *train_glob(void)
{
    static char train[512];
    snprintf(train, sizeof train, "%s/rep/part*.csv", D.dir);
    return train;
}

/* spec_on's job, its data reading with shuffle (a "data.shuffle" object, or NULL: none). */
static const char *spec_shuffled(bool mlp, int n, const char *device, int iterations, const char *shuffle)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"data\":{\"train\":\"%s\"%s%s},\"model\":%s,\"loss\":\"mse\",\"optimizer\":%s,"
             "\"clip_grad_norm\":0.5,\"batch_size\":97,\"iterations\":%d,\"dtype\":\"float64\",\"seed\":0,"
             "\"replicas\":%d,\"device\":\"%s\"}",
             train_glob(), shuffle ? ",\"shuffle\":" : "", shuffle ? shuffle : "",
             mlp ? "{\"type\":\"mlp\",\"hidden\":[16,8]}" : "{\"type\":\"linear\"}",
             mlp ? "{\"type\":\"adam\",\"lr\":0.01}" : "{\"type\":\"sgd\",\"lr\":0.03}", iterations, n, device);
    return buf;
}

/* The seed baseline, or an MLP with Adam, as n replicas on device; 97-row batches split unevenly. */
static const char *spec_on(bool mlp, int n, const char *device, int iterations)
{
    return spec_shuffled(mlp, n, device, iterations, NULL);
}

static const char *spec_of(bool mlp, int n)
{
    return spec_on(mlp, n, "cpu", ITERATIONS);
}

static void losses_of(const char *spec, double *loss)
{
    char id[64];
    submit_job(&D, spec, id, sizeof id);
    json_t *j = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
    job_losses(&D, id, loss, ITERATIONS);
}

static void expect_replicas_like_one(bool mlp, double tol)
{
    double one[ITERATIONS], many[ITERATIONS];
    losses_of(spec_of(mlp, 1), one);
    for (int n = 2; n <= 3; n++) {
        losses_of(spec_of(mlp, n), many);
        for (int i = 0; i < ITERATIONS; i++)
            cr_expect_leq(fabs(many[i] - one[i]) / fabs(one[i]), tol,
                          "%d replicas, iteration %d: loss %.17g, one replica %.17g", n, i, many[i], one[i]);
    }
}

Test(replicas, the_baseline_as_2_and_3_replicas_has_one_replicas_losses)
{
    expect_replicas_like_one(false, 1e-9);
}

/*
 * With a shuffle buffer each replica makes the one reader's draws and keeps its share of them
 * (storage/dataset.h): 24 batches of 97 over 700 rows cross three epochs' reshuffles.
 */
Test(replicas, the_baseline_with_a_shuffle_buffer_as_2_and_3_replicas_has_one_replicas_losses)
{
    static const char shuffle[] = "{\"partitions\":true,\"buffer\":150}";
    double one[ITERATIONS], many[ITERATIONS];
    losses_of(spec_shuffled(false, 1, "cpu", ITERATIONS, shuffle), one);
    for (int n = 2; n <= 3; n++) {
        losses_of(spec_shuffled(false, n, "cpu", ITERATIONS, shuffle), many);
        for (int i = 0; i < ITERATIONS; i++)
            cr_expect_leq(fabs(many[i] - one[i]) / fabs(one[i]), 1e-9,
                          "%d replicas, iteration %d: loss %.17g, one replica %.17g", n, i, many[i], one[i]);
    }
}

Test(replicas, an_mlp_with_adam_as_2_and_3_replicas_has_one_replicas_losses)
{
    expect_replicas_like_one(true, 1e-8);
}

/*
 * The baseline (or, mlp, a 64-64 MLP with Adam) as n replicas evaluating data.test (the folder
 * test below D.dir) every `every` steps.
 */
static const char *linear_eval_spec(bool mlp, const char *test, int n, int iterations, int every)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"data\":{\"train\":\"%s\",\"test\":\"%s/%s/part*.csv\"},\"model\":%s,"
             "\"loss\":\"mse\",\"optimizer\":%s,\"clip_grad_norm\":0.5,"
             "\"batch_size\":97,\"iterations\":%d,\"eval_every\":%d,\"dtype\":\"float64\",\"seed\":0,"
             "\"replicas\":%d,\"device\":\"cpu\"}", train_glob(), D.dir, test,
             mlp ? "{\"type\":\"mlp\",\"hidden\":[64,64]}" : "{\"type\":\"linear\"}",
             mlp ? "{\"type\":\"adam\",\"lr\":0.001}" : "{\"type\":\"sgd\",\"lr\":0.03}", iterations, every, n);
    return buf;
}

/*
 * With data.test and eval_every 5: the baseline (a test set of 301 rows, its 97-row batches
 * and 10-row tail split unevenly over 3), or a 3-class MLP on the cross-entropy fixture (100
 * test rows in batches of 64), as n replicas. Each replica evaluates its share of every test batch.
 */
static const char *eval_spec(bool classifier, int n)
{
    static char buf[2048];
    if (!classifier)
        return linear_eval_spec(false, "reptest", n, ITERATIONS, 5);
    snprintf(buf, sizeof buf,
             "{\"data\":{\"train\":\"%s/eval_ce_train.csv\",\"test\":\"%s/eval_ce_test.csv\",\"header\":false},"
             "\"model\":{\"type\":\"mlp\",\"hidden\":[16],\"activation\":\"relu\",\"outputs\":3},"
             "\"loss\":\"cross_entropy\",\"optimizer\":{\"type\":\"adam\",\"lr\":0.01},\"batch_size\":64,"
             "\"iterations\":%d,\"eval_every\":5,\"dtype\":\"float64\",\"seed\":0,\"replicas\":%d,"
             "\"device\":\"cpu\"}", D.dir, D.dir, ITERATIONS, n);
    return buf;
}

/* Every eval_loss of 2 and 3 replicas is one replica's, after iterations 4, 9, .. and the last. */
static void expect_evals_like_one(bool classifier, double tol)
{
    double one[ITERATIONS], many[ITERATIONS];
    succeeded_column(&D, eval_spec(classifier, 1), "eval_loss", one, ITERATIONS);
    for (int i = 0; i < ITERATIONS; i++)
        cr_assert(isnan(one[i]) == !((i + 1) % 5 == 0 || i == ITERATIONS - 1),
                  "one replica: eval_loss %g after iteration %d", one[i], i);
    for (int n = 2; n <= 3; n++) {
        succeeded_column(&D, eval_spec(classifier, n), "eval_loss", many, ITERATIONS);
        for (int i = 0; i < ITERATIONS; i++)
            cr_expect(isnan(one[i]) ? isnan(many[i]) : fabs(many[i] - one[i]) <= tol * fabs(one[i]),
                      "%d replicas, after iteration %d: eval_loss %.17g, one replica %.17g", n, i, many[i], one[i]);
    }
}

Test(replicas, the_baseline_as_2_and_3_replicas_has_one_replicas_eval_losses)
{
    cr_assert(gen_dctaxi_seed(&D, "reptest", 301, 2, 1));
    expect_evals_like_one(false, 1e-9);
}

/* Adam's steps as replicas are one replica's to rounding only (1e-8, as for the training loss). */
Test(replicas, an_mlp_classifier_as_2_and_3_replicas_has_one_replicas_eval_losses)
{
    copy_eval_fixture(&D, "eval_ce_train.csv");
    copy_eval_fixture(&D, "eval_ce_test.csv");
    expect_evals_like_one(true, 1e-8);
}

/*
 * A job cancelled while its 3 replicas evaluate (an MLP's loss on a test set of 40000 rows
 * after every step, so most of a step's time is evaluation) ends on every replica: it is
 * cancelled, and the three workers take the next 3-replica job, none left waiting in the
 * evaluation's sum.
 */
Test(replicas, a_job_cancelled_while_its_replicas_evaluate_frees_all_three)
{
    cr_assert(gen_dctaxi_seed(&D, "bigtest", 40000, 4, 1));
    char id[64];
    const char *spec = linear_eval_spec(true, "bigtest", 3, 10000000, 1);
    submit_job(&D, spec, id, sizeof id);
    wait_job_iterations(&D, id, 2);
    job_action(&D, id, "cancel", 202);
    json_t *j = wait_job_done(&D, id, 60);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "cancelled");
    json_decref(j);
    double loss[ITERATIONS];
    losses_of(spec_of(false, 3), loss);
}

/*
 * The MLP's gradient (289 float64s) in buckets of 0.001 MiB (131 elements: 3 buckets, each
 * all-reduced while backward runs) gives the losses of the gradient all-reduced whole, bit
 * for bit; GET /jobs/{id}/replicas counts the buckets.
 */
Test(replicas, an_mlp_whose_gradient_goes_in_buckets_has_the_losses_of_it_whole)
{
    double whole[ITERATIONS], bucketed[ITERATIONS];
    losses_of(spec_with(spec_of(true, 2), "\"replica_bucket_mb\":0"), whole);
    losses_of(spec_with(spec_of(true, 2), "\"replica_bucket_mb\":0.001"), bucketed);
    expect_bucketed_as_whole(bucketed, whole, ITERATIONS);
    char id[64], path[160];
    submit_job(&D, spec_with(spec_on(true, 2, "cpu", 10000000), "\"replica_bucket_mb\":0.001"), id, sizeof id);
    wait_job_iterations(&D, id, 5);
    snprintf(path, sizeof path, "/jobs/%s/replicas", id);
    json_t *body = get_json(&D, path, 200);
    json_t *list = json_object_get(body, "replicas");
    cr_assert_eq(json_array_size(list), 2, "%zu replicas listed", json_array_size(list));
    for (size_t r = 0; r < 2; r++) {
        json_t *x = json_array_get(list, r);
        json_int_t buckets = json_integer_value(json_object_get(x, "buckets"));
        cr_expect_eq(buckets, 3, "replica %zu: %lld buckets", r, (long long)buckets);
        cr_expect_geq(json_number_value(json_object_get(x, "allreduce_hidden_seconds")), 0);
    }
    json_decref(body);
    job_action(&D, id, "cancel", 202);
    wait_job_state(&D, id, "cancelled", 60);
}

/* Long enough that a job cannot end between the iteration a test waits for and the pause or
 * shutdown that follows, however busy the machine. */
#define STOPPED_ITERATIONS 3000

Test(replicas, paused_and_resumed_replicas_go_on_as_if_never_stopped)
{
    static double one[STOPPED_ITERATIONS], loss[STOPPED_ITERATIONS];
    char id[64];
    submit_job(&D, spec_on(false, 1, "cpu", STOPPED_ITERATIONS), id, sizeof id);
    json_decref(wait_job_done(&D, id, 120));
    job_losses(&D, id, one, STOPPED_ITERATIONS);
    submit_job(&D, spec_on(false, 3, "cpu", STOPPED_ITERATIONS), id, sizeof id);
    wait_job_iterations(&D, id, 3);
    job_action(&D, id, "pause", 202);
    wait_job_state(&D, id, "paused", 60);
    job_action(&D, id, "resume", 202);
    json_t *j = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded");
    json_decref(j);
    job_losses(&D, id, loss, STOPPED_ITERATIONS);
    for (int i = 0; i < STOPPED_ITERATIONS; i++)
        cr_expect_leq(fabs(loss[i] - one[i]) / fabs(one[i]), 1e-9, "iteration %d: %.17g, uninterrupted %.17g",
                      i, loss[i], one[i]);
}

static void expect_refused(const char *spec, const char *says)
{
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", spec, &r));
    cr_expect_eq(r.status, 400, "%s", r.body);
    json_t *body = json_loads(r.body, 0, NULL);
    json_t *err = json_object_get(body, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "field")), "replicas", "%s", r.body);
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_expect(msg && strstr(msg, says), "the message does not say \"%s\": %s", says, r.body);
    json_decref(body);
    http_reply_free(&r);
}

Test(replicas, more_replicas_than_workers_on_one_named_gpu_or_on_mixed_devices_are_refused)
{
    expect_refused(spec_of(false, 4), "4 replicas, but this traind has 3 workers");
    expect_refused(spec_on(false, 2, "cuda:0", ITERATIONS), "\"cuda:0\" names one");
    expect_refused("{\"data\":{\"train\":\"d/part*.csv\"},\"iterations\":5,\"replicas\":2,"
                   "\"device\":[\"cpu\",\"cuda:0\"]}", "one kind of device");
}

Test(replicas, a_running_job_shows_each_replicas_figures_and_an_ended_one_none)
{
    char id[64], path[160];
    submit_job(&D, spec_on(false, 3, "cpu", 10000000), id, sizeof id);
    wait_job_iterations(&D, id, 20);
    snprintf(path, sizeof path, "/jobs/%s/replicas", id);
    json_t *body = get_json(&D, path, 200);
    json_t *list = json_object_get(body, "replicas");
    cr_assert_eq(json_array_size(list), 3, "%zu replicas listed", json_array_size(list));
    for (size_t r = 0; r < 3; r++) {
        json_t *x = json_array_get(list, r);
        cr_expect_eq(json_integer_value(json_object_get(x, "rank")), (json_int_t)r);
        const char *dev = json_string_value(json_object_get(x, "device"));
        cr_expect(dev && strncmp(dev, "cpu:", 4) == 0, "replica %zu on %s", r, dev ? dev : "(null)");
        for (size_t q = 0; q < r; q++)
            cr_expect_str_neq(dev, json_string_value(json_object_get(json_array_get(list, q), "device")),
                              "replicas %zu and %zu share a worker", q, r);
        cr_expect_gt(json_integer_value(json_object_get(x, "iterations")), 0);
        cr_expect_gt(json_number_value(json_object_get(json_object_get(x, "step_seconds"), "median")), 0);
        cr_expect_geq(json_number_value(json_object_get(x, "allreduce_seconds")), 0);
    }
    json_decref(body);
    struct http_reply r;
    cr_assert(http(&D, "GET", "/metrics", NULL, NULL, &r));
    char series[160];
    snprintf(series, sizeof series, "traind_replica_step_seconds{job=\"%s\",replica=\"2\"", id);
    cr_expect(strstr(r.body, series) != NULL, "/metrics lacks %s", series);
    http_reply_free(&r);
    job_action(&D, id, "cancel", 202);
    wait_job_state(&D, id, "cancelled", 60);
    snprintf(path, sizeof path, "/jobs/%s/replicas", id);
    body = get_json(&D, path, 200);
    cr_expect_eq(json_array_size(json_object_get(body, "replicas")), 0, "an ended job lists replicas");
    cr_expect_eq(json_integer_value(json_object_get(body, "replicas_asked")), 3);
    json_decref(body);
}

/* ---- What goes wrong. ---- */

/* traind again on the same state, with three workers and the flags in extra (NULL-terminated). */
static void restart_with(const char *const *extra)
{
    int status = daemon_stop(&D, 30);
    if (status != 0)
        daemon_print_log(&D);
    cr_assert_eq(status, 0, "traind exited with %d on SIGTERM", status);
    cr_assert(daemon_spawn(&D, extra), "traind did not start again");
}

/* The device of replica `rank` of running job id (GET /jobs/{id}/replicas), into out. */
static void replica_device(const char *id, int rank, char *out, size_t cap)
{
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/replicas", id);
    json_t *body = get_json(&D, path, 200);
    const char *dev = json_string_value(json_object_get(json_array_get(json_object_get(body, "replicas"),
                                                                       (size_t)rank), "device"));
    cr_assert_not_null(dev, "job %s lists no replica %d", id, rank);
    snprintf(out, cap, "%s", dev);
    json_decref(body);
}

/* The thread of traind's that trains on device: its name is "traind/DEVICE" (worker.c). */
static pid_t worker_thread(const char *device)
{
    char dir[64], want[32];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)D.pid);
    snprintf(want, sizeof want, "traind/%s", device);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
    pid_t found = 0;
    for (struct dirent *de; !found && (de = readdir(d));) {
        char path[400], comm[32] = "";
        snprintf(path, sizeof path, "%s/%s/comm", dir, de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f))
            comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
        if (strcmp(comm, want) == 0)
            found = (pid_t)atoi(de->d_name);
    }
    closedir(d);
    cr_assert(found, "traind has no thread named %s", want);
    return found;
}

static void pin_to(pid_t tid, int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    cr_assert_eq(sched_setaffinity(tid, sizeof set, &set), 0, "sched_setaffinity: %s", strerror(errno));
}

/* A busy thread of the test's on one CPU, at the default priority, until told to stop. */
struct hog {
    pthread_t th;
    int cpu;
    atomic_bool stop;
};

static void *hog_main(void *arg)
{
    struct hog *h = arg;
    pin_to(0, h->cpu);
    volatile unsigned long x = 0;
    while (!atomic_load(&h->stop))
        x++;
    return NULL;
}

/*
 * An MLP whose steps take some CPU as 2 replicas; one is made slow by the kernel alone: its
 * thread at the lowest priority (nice 19, where traind put it at 10), sharing its CPU with a
 * busy thread of the test's. Its record then names it, and GET /jobs/{id}/replicas marks it.
 */
Test(replicas, a_replica_made_slow_is_named_a_straggler_in_the_jobs_record)
{
    static const char *const extra[] = {"--cpu-workers", "3", "--gpus", "none", "--heartbeat-timeout", "4", NULL};
    restart_with(extra);   /* the health check, which looks for stragglers, every 2 s */
    char spec[1024], id[64], dev[32], path[160];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s\"},\"model\":{\"type\":\"mlp\",\"hidden\":[64,64]},\"loss\":\"mse\","
             "\"optimizer\":{\"type\":\"adam\",\"lr\":0.001},\"batch_size\":512,\"iterations\":100000000,"
             "\"dtype\":\"float32\",\"seed\":0,\"replicas\":2,\"device\":\"cpu\"}", train_glob());
    submit_job(&D, spec, id, sizeof id);
    wait_job_iterations(&D, id, 3);
    replica_device(id, 1, dev, sizeof dev);
    pid_t slow = worker_thread(dev);
    cr_assert_eq(setpriority(PRIO_PROCESS, (id_t)slow, 19), 0, "setpriority: %s", strerror(errno));
    pin_to(slow, 0);
    struct hog h = {.cpu = 0};
    atomic_init(&h.stop, false);
    cr_assert_eq(pthread_create(&h.th, NULL, hog_main, &h), 0);
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *job = NULL, *w = NULL;
    for (double t0 = now_s(); now_s() - t0 < 120; sleep_ms(200)) {
        json_decref(job);
        job = get_json(&D, path, 200);
        if (json_array_size(w = json_object_get(job, "warnings")) > 0)
            break;
    }
    snprintf(path, sizeof path, "/jobs/%s/replicas", id);
    json_t *reps = get_json(&D, path, 200);
    atomic_store(&h.stop, true);
    pthread_join(h.th, NULL);
    cr_assert_eq(json_array_size(w), 1, "no straggler named in 120 s: %s", json_dumps(job, 0));
    json_t *x = json_array_get(w, 0);
    cr_expect_str_eq(json_string_value(json_object_get(x, "kind")), "straggler");
    cr_expect_eq(json_integer_value(json_object_get(x, "replica")), 1);
    cr_expect_str_eq(json_string_value(json_object_get(x, "device")), dev);
    cr_expect_gt(json_number_value(json_object_get(x, "ratio")), 1.5);
    cr_expect_gt(json_integer_value(json_object_get(x, "since_iteration")), 0);
    json_t *r1 = json_array_get(json_object_get(reps, "replicas"), 1);
    cr_expect(json_is_true(json_object_get(r1, "straggler")), "replica 1 is not marked: %s", json_dumps(reps, 0));
    cr_expect(json_is_false(json_object_get(json_array_get(json_object_get(reps, "replicas"), 0), "straggler")));
    json_decref(reps);
    json_decref(job);
    job_action(&D, id, "cancel", 202);
    wait_job_state(&D, id, "cancelled", 60);
}

/*
 * Stops thread tid (seized) where it waits on a futex, as a hung thread waits: stopped in its
 * own code, or in another call (an mmap under the allocator's lock, a write under the log's,
 * a futex wake under the lock whose waiters it wakes), it might hold a lock its peers take,
 * which no hang does. It is let go and stopped again until /proc says it stopped in a futex
 * wait (FUTEX_WAIT or FUTEX_WAIT_BITSET, whatever the flags).
 */
static void freeze_waiting(pid_t tid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)D.pid, (int)tid);
    for (int tries = 0; tries < 5000; tries++) {
        cr_assert_eq(ptrace(PTRACE_INTERRUPT, tid, 0, 0), 0, "PTRACE_INTERRUPT: %s", strerror(errno));
        int st;
        cr_assert_eq(waitpid(tid, &st, __WALL), tid);
        FILE *f = fopen(path, "r");
        long nr = -1;
        unsigned long word = 0, op = 0;
        bool read = f && fgets(line, sizeof line, f) && sscanf(line, "%ld %lx %lx", &nr, &word, &op) == 3;
        if (f)
            fclose(f);
        int cmd = (int)(op & FUTEX_CMD_MASK);
        if (read && nr == SYS_futex && (cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET))
            return;
        cr_assert_eq(ptrace(PTRACE_CONT, tid, 0, 0), 0, "PTRACE_CONT: %s", strerror(errno));
        sleep_ms(1);
    }
    cr_assert_fail("thread %d never stopped in a futex wait", (int)tid);
}

/* Long enough that the job cannot end between its 20th iteration and the freeze, however busy the machine. */
#define FROZEN_ITERATIONS 5000

/*
 * A replica's thread frozen (ptrace, as a debugger stops it) mid-run: its peer gives up at the
 * all-reduce after --allreduce-timeout, the job goes back to the queue and on from its latest
 * checkpoint on two other workers, with the one replica's losses; the daemon answers meanwhile.
 */
Test(replicas, a_frozen_replica_ends_the_run_and_the_job_goes_on_from_its_checkpoint_elsewhere)
{
    static const char *const extra[] = {"--cpu-workers", "3", "--gpus", "none", "--allreduce-timeout", "2", NULL};
    restart_with(extra);
    double one[FROZEN_ITERATIONS], loss[FROZEN_ITERATIONS];
    char id[64], dev[32], line[160];
    submit_job(&D, spec_on(false, 1, "cpu", FROZEN_ITERATIONS), id, sizeof id);
    json_decref(wait_job_done(&D, id, 120));
    job_losses(&D, id, one, FROZEN_ITERATIONS);

    submit_job(&D, spec_with(spec_on(false, 2, "cpu", FROZEN_ITERATIONS), "\"checkpoint_every\":100"), id, sizeof id);
    wait_job_iterations(&D, id, 20);
    replica_device(id, 1, dev, sizeof dev);
    pid_t tid = worker_thread(dev);
    if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) {
        const char *ci = getenv("CI");
        cr_assert(!(ci && strcmp(ci, "true") == 0), "ptrace(PTRACE_SEIZE) of a thread of traind's: %s; "
                  "this test needs ptrace of a child (kernel.yama.ptrace_scope <= 1, no seccomp filter on it)",
                  strerror(errno));
        cr_skip_test("ptrace is not allowed here: %s", strerror(errno));
    }
    freeze_waiting(tid);
    snprintf(line, sizeof line, "job %s lost replica 1", id);
    for (double t0 = now_s(); now_s() - t0 < 60 && !daemon_log_contains(&D, line); sleep_ms(100))
        json_decref(get_json(&D, "/healthz", 200));   /* the daemon answers while a replica is frozen */
    bool lost = daemon_log_contains(&D, line);
    if (!lost)
        daemon_print_log(&D);
    json_t *j = lost ? wait_job_done(&D, id, 120) : NULL;
    ptrace(PTRACE_DETACH, tid, 0, 0);   /* it goes on, finds its world ended, and its worker is free */
    cr_assert(lost, "the frozen replica was not found lost in 60 s");
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
    job_losses(&D, id, loss, FROZEN_ITERATIONS);
    for (int i = 0; i < FROZEN_ITERATIONS; i++)
        cr_expect_leq(fabs(loss[i] - one[i]) / fabs(one[i]), 1e-9, "iteration %d: %.17g, one replica %.17g",
                      i, loss[i], one[i]);
}

/*
 * A job stored as 3 replicas and stopped by a shutdown goes on as 2 when traind comes back
 * with 2 workers (rather than waiting for a third that will not come), with the one
 * replica's losses.
 */
Test(replicas, a_job_of_3_replicas_goes_on_as_2_after_a_restart_with_2_workers)
{
    static double one[STOPPED_ITERATIONS], loss[STOPPED_ITERATIONS];
    char id[64], line[200];
    submit_job(&D, spec_on(false, 1, "cpu", STOPPED_ITERATIONS), id, sizeof id);
    json_decref(wait_job_done(&D, id, 120));
    job_losses(&D, id, one, STOPPED_ITERATIONS);
    submit_job(&D, spec_with(spec_on(false, 3, "cpu", STOPPED_ITERATIONS), "\"checkpoint_every\":100"), id, sizeof id);
    wait_job_iterations(&D, id, 10);
    static const char *const two[] = {"--cpu-workers", "2", "--gpus", "none", NULL};
    restart_with(two);
    snprintf(line, sizeof line, "job %s stopped for shutdown", id);
    cr_assert(daemon_log_contains(&D, line), "the job had ended before the restart: nothing was tested");
    json_t *j = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
    snprintf(line, sizeof line, "job %s runs as 2 replicas of the 3 it asks", id);
    cr_expect(daemon_log_contains(&D, line), "the log does not say: %s", line);
    job_losses(&D, id, loss, STOPPED_ITERATIONS);
    for (int i = 0; i < STOPPED_ITERATIONS; i++)
        cr_expect_leq(fabs(loss[i] - one[i]) / fabs(one[i]), 1e-9, "iteration %d: %.17g, one replica %.17g",
                      i, loss[i], one[i]);
}
