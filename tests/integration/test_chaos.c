/*
 * test_chaos.c — traind killed with SIGKILL at random moments of a mixed workload, and started
 * again on the same state: no acknowledged job is lost, terminal states stay, metrics stay
 * gapless, checkpoints stay whole, and every job that succeeds has an uninterrupted run's losses.
 *
 * TRAIND_CHAOS_SEED=N replays a run (the seed is printed); the daemon's timing still varies.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"

enum {
    CHAOS_KILLS = 24,
    CHAOS_JOBS = 40,          /* submitted over the run; two CPU workers, so most of them wait */
    CHAOS_CANCELS = 5,        /* at most, so most jobs run to the end and meet their reference */
    CHAOS_ROWS = 3000,        /* rows of generated DC-taxi data */
    CHAOS_FIRST_JOBS = 6,     /* submitted at once; then at most three more for each kill */
    MAX_ITERS = 1500,
};

enum shape { LINEAR_A, LINEAR_B, MLP_ADAM, MLP_MOMENTUM, MLP_NO_OUTPUTS, N_SHAPES };

/* The specs the jobs are made of: the DC-taxi baseline (jobs.c) and small MLPs, all on the CPU. */
struct shape_def {
    int iterations, batch, checkpoint_every;
    const char *mlp;          /* NULL: the baseline; else model, loss, optimizer, dtype and seed */
};

static const struct shape_def shapes[N_SHAPES] = {
    [LINEAR_A] = {1500, 64, 17, NULL},
    [LINEAR_B] = {1200, 32, 23, NULL},
    [MLP_ADAM] = {400, 192, 10,
                  "\"model\":{\"type\":\"mlp\",\"hidden\":[64,48],\"activation\":\"relu\",\"outputs\":1},"
                  "\"loss\":\"mse\",\"optimizer\":{\"type\":\"adam\",\"lr\":0.01},\"clip_grad_norm\":1.0,"
                  "\"dtype\":\"float64\",\"seed\":3"},
    [MLP_MOMENTUM] = {400, 128, 9,
                      "\"model\":{\"type\":\"mlp\",\"hidden\":[64],\"activation\":\"tanh\",\"outputs\":1},"
                      "\"loss\":\"mse\",\"optimizer\":{\"type\":\"sgd\",\"lr\":0.01,\"momentum\":0.9},"
                      "\"dtype\":\"float32\",\"seed\":5"},
    [MLP_NO_OUTPUTS] = {300, 64, 11,
                        "\"model\":{\"type\":\"mlp\",\"hidden\":[8],\"activation\":\"sigmoid\"},"
                        "\"loss\":\"mse\",\"optimizer\":{\"type\":\"adam\",\"lr\":0.01},"
                        "\"dtype\":\"float64\",\"seed\":7"},
};

/* Every shape, the MLP without model.outputs too (its outputs are sized from the data). */
static const int n_shapes = N_SHAPES;

/* One job of the chaos run, as the client knows it. */
struct tracked {
    char id[17];              /* "" until a POST of its spec was answered */
    int n;                    /* its client_id is chaos-<n> */
    enum shape shape;
    int posts;                /* POSTs sent, answered or not */
    char terminal[16];        /* the first terminal state seen */
    bool paused_seen;         /* seen paused, and neither resumed nor cancelled since */
    long long since;          /* the metrics poller's next_since */
    double loss[MAX_ITERS];   /* losses seen so far, NaN where none */
};

static struct {
    struct daemon_proc d;
    char train[512];
    uint32_t rng;
    int n_jobs, cancels, kills;
    struct tracked job[CHAOS_JOBS];
    double reference[N_SHAPES][MAX_ITERS];
} C;

static void setup(void)
{
    /* Two workers for the queue; no GPU, so the reference and the chaos jobs train alike. */
    setenv("TRAIND_CPU_WORKERS", "2", 1);
    setenv("TRAIND_GPUS", "none", 1);
    cr_assert(daemon_start(&C.d), "traind did not start (see its log under /tmp/traind-it-*)");
}

static void teardown(void)
{
    daemon_stop_clean(&C.d);
}

TestSuite(chaos, .init = setup, .fini = teardown, .timeout = 600);

static uint32_t rnd(uint32_t n)
{
    C.rng ^= C.rng << 13;   /* xorshift32 */
    C.rng ^= C.rng >> 17;
    C.rng ^= C.rng << 5;
    return n ? C.rng % n : 0;
}

/* Shape s's spec on train, with members (a JSON object's members, or "") appended. */
static const char *shape_spec(enum shape s, const char *train, const char *members)
{
    static char base[1024], all[1400];
    const struct shape_def *sh = &shapes[s];
    if (sh->mlp)
        snprintf(base, sizeof base, "{\"name\":\"chaos-mlp\",\"data\":{\"train\":\"%s\"},%s,"
                 "\"batch_size\":%d,\"iterations\":%d}", train, sh->mlp, sh->batch, sh->iterations);
    else
        snprintf(base, sizeof base, "%s", baseline_spec(train, sh->iterations, sh->batch));
    snprintf(all, sizeof all, "\"device\":\"cpu\",\"checkpoint_every\":%d%s%s", sh->checkpoint_every,
             members[0] ? "," : "", members);
    return spec_with(base, all);
}

static const char *tracked_spec(const struct tracked *t)
{
    char member[64];
    snprintf(member, sizeof member, "\"client_id\":\"chaos-%d\"", t->n);
    return shape_spec(t->shape, C.train, member);
}

static bool is_terminal(const char *st)
{
    return strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 || strcmp(st, "cancelled") == 0;
}

static bool is_legal(const char *st)
{
    return is_terminal(st) || strcmp(st, "queued") == 0 || strcmp(st, "running") == 0 ||
           strcmp(st, "paused") == 0;
}

/* Each shape once on a daemon of its own that nobody kills: the losses a chaos job must end with. */
static void run_references(void)
{
    struct daemon_proc r;
    cr_assert(daemon_start(&r), "the reference traind did not start");
    cr_assert(gen_dctaxi(&r, "dev", CHAOS_ROWS, 2));
    char train[512], id[N_SHAPES][64];
    snprintf(train, sizeof train, "%s/dev/part*.csv", r.dir);
    for (int s = 0; s < n_shapes; s++)
        submit_job(&r, shape_spec((enum shape)s, train, ""), id[s], sizeof id[s]);
    for (int s = 0; s < n_shapes; s++) {
        json_t *job = wait_job_done(&r, id[s], 120);
        cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded",
                         "reference job of shape %d: %s", s,
                         json_string_value(json_object_get(json_object_get(job, "error"), "message")));
        json_decref(job);
        job_losses(&r, id[s], C.reference[s], (size_t)shapes[s].iterations);
    }
    daemon_stop_clean(&r);
}

/* A loss seen for iteration it of t: the same every time it is seen, whatever restarts came between. */
static void note_loss(struct tracked *t, long long it, double loss)
{
    cr_assert(it >= 0 && it < shapes[t->shape].iterations, "job %s has an iteration %lld", t->id, it);
    if (isnan(t->loss[it]))
        t->loss[it] = loss;
    else
        cr_assert_eq(loss, t->loss[it], "job %s iteration %lld: loss %.17g, and %.17g before", t->id, it,
                     loss, t->loss[it]);
}

/*
 * A metrics page from since: iterations from since on, each one more than the last, and
 * next_since one past the last (or since when empty). Returns next_since.
 */
static long long check_page(struct tracked *t, json_t *m, long long since)
{
    json_t *rows = json_object_get(m, "rows"), *row;
    size_t i, at = metrics_column(m, "loss");
    long long want = since;
    json_array_foreach(rows, i, row) {
        long long it = json_integer_value(json_array_get(row, 0));
        cr_assert_eq(it, want, "job %s: metrics from %lld: row %zu is iteration %lld, not %lld", t->id,
                     since, i, it, want);
        note_loss(t, it, json_number_value(json_array_get(row, at)));
        want = it + 1;
    }
    long long next = json_integer_value(json_object_get(m, "next_since"));
    cr_assert_eq(next, want, "job %s: next_since %lld after rows up to %lld", t->id, next, want - 1);
    return next;
}

/* POSTs t's spec; true when answered: 201 a new job, or 200 the job its client_id already named. */
static bool post_tracked(struct tracked *t)
{
    struct http_reply r;
    t->posts++;
    bool answered = http(&C.d, "POST", "/jobs", "application/json", tracked_spec(t), &r) && r.status;
    if (answered) {
        cr_assert(r.status == 201 || r.status == 200, "POST chaos-%d: %ld %s", t->n, r.status, r.body);
        const char *id = json_string_value(json_object_get(r.json, "id"));
        cr_assert_not_null(id, "POST chaos-%d: %s", t->n, r.body);
        if (t->id[0])
            cr_assert(r.status == 200 && strcmp(id, t->id) == 0,
                      "client_id chaos-%d again: %ld, job %s rather than the same job %s", t->n, r.status,
                      id, t->id);
        else
            cr_assert(r.status == 201 || t->posts > 1, "a new client_id answered 200: %s", r.body);
        snprintf(t->id, sizeof t->id, "%s", id);
    }
    http_reply_free(&r);
    return answered;
}

static void submit_new(void)
{
    if (C.n_jobs == CHAOS_JOBS)
        return;
    struct tracked *t = &C.job[C.n_jobs];
    t->n = C.n_jobs++;
    t->shape = (enum shape)rnd((uint32_t)n_shapes);
    for (int i = 0; i < MAX_ITERS; i++)
        t->loss[i] = NAN;
    post_tracked(t);
}

/* A job the client holds an id for, at random (NULL when none). */
static struct tracked *any_acked(void)
{
    if (C.n_jobs == 0)
        return NULL;
    struct tracked *t = &C.job[rnd((uint32_t)C.n_jobs)];
    return t->id[0] ? t : NULL;
}

/* POST /jobs/{id}/<verb>: 202, or 409 when the job's state does not allow it; false unanswered. */
static bool control(struct tracked *t, const char *verb)
{
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/%s", t->id, verb);
    struct http_reply r;
    bool answered = http(&C.d, "POST", path, NULL, NULL, &r) && r.status;
    if (answered)
        cr_assert(r.status == 202 || r.status == 409, "POST %s: %ld %s", path, r.status, r.body);
    http_reply_free(&r);
    return answered;
}

/* One metrics poll of t from its poller's next_since, a small page. */
static void poll_metrics(struct tracked *t)
{
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/metrics?since=%lld&limit=%u", t->id, t->since, 1 + rnd(40));
    struct http_reply r;
    if (http(&C.d, "GET", path, NULL, NULL, &r) && r.status) {
        cr_assert_eq(r.status, 200, "GET %s: %ld %s", path, r.status, r.body);
        cr_assert_not_null(r.json, "GET %s: %s", path, r.body);
        t->since = check_page(t, r.json, t->since);
    }
    http_reply_free(&r);
}

/* One client action at random, tolerating a daemon that dies under it. */
static void act_once(void)
{
    uint32_t a = rnd(100);
    struct tracked *t = any_acked();
    if ((a < 12 && C.n_jobs < CHAOS_FIRST_JOBS + 3 * C.kills) || !t)
        submit_new();
    else if (a < 22)
        post_tracked(t);   /* the same spec and client_id: the same job */
    else if (a < 32)
        control(t, "pause");
    else if (a < 42) {
        t->paused_seen = false;   /* from now on it may run again, even if unanswered */
        control(t, "resume");
    } else if (a < 46 && C.cancels < CHAOS_CANCELS && !t->terminal[0]) {
        C.cancels++;
        t->paused_seen = false;   /* from now on it may be cancelled, even if unanswered */
        control(t, "cancel");
    } else {
        poll_metrics(t);
    }
    sleep_ms((int)rnd(8));
}

static struct tracked *find_tracked(const char *id)
{
    for (int i = 0; i < C.n_jobs; i++)
        if (strcmp(C.job[i].id, id) == 0)
            return &C.job[i];
    return NULL;
}

/* GET /jobs: exactly the acknowledged jobs, in legal states; terminal ones as first seen; paused ones still paused. */
static void check_listed(void)
{
    json_t *list = get_json(&C.d, "/jobs?limit=10000", 200);
    json_t *jobs = json_object_get(list, "jobs"), *j;
    size_t i, acked = 0;
    json_array_foreach(jobs, i, j) {
        const char *id = json_string_value(json_object_get(j, "id"));
        const char *st = json_string_value(json_object_get(j, "state"));
        struct tracked *t = id ? find_tracked(id) : NULL;
        cr_assert_not_null(t, "GET /jobs lists %s, which no POST was answered with (a second job?)", id);
        cr_assert(st && is_legal(st), "job %s is in state %s", id, st ? st : "(none)");
        if (t->terminal[0])
            cr_assert_str_eq(st, t->terminal, "job %s was %s and is now %s", id, t->terminal, st);
        else if (is_terminal(st))
            snprintf(t->terminal, sizeof t->terminal, "%s", st);
        if (t->paused_seen)
            cr_assert_str_eq(st, "paused", "job %s was paused and is now %s", id, st);
        t->paused_seen = strcmp(st, "paused") == 0;
    }
    for (int k = 0; k < C.n_jobs; k++)
        acked += C.job[k].id[0] != '\0';
    for (int k = 0; k < C.n_jobs; k++) {
        bool found = false;
        json_array_foreach(jobs, i, j)
            found = found || strcmp(json_string_value(json_object_get(j, "id")), C.job[k].id) == 0;
        cr_assert(found || !C.job[k].id[0], "job %s (client_id chaos-%d, shape %d) was acknowledged and is "
                  "not listed", C.job[k].id, C.job[k].n, C.job[k].shape);
    }
    cr_assert_eq(json_array_size(jobs), acked, "GET /jobs lists %zu jobs; %zu were acknowledged",
                 json_array_size(jobs), acked);
    json_decref(list);
}

/*
 * A served checkpoint: 8 bytes of header length, a JSON header, then data exactly as long as
 * its tensors' offsets say, each tensor's bytes its dtype's size times its shape; __metadata__
 * names the job. Returns the iteration it was taken after.
 */
static long long check_safetensors(const char *id, const char *p, size_t n)
{
    uint64_t hl = 0;
    cr_assert_geq(n, 8, "job %s: a checkpoint of %zu bytes", id, n);
    memcpy(&hl, p, 8);
    cr_assert_leq(hl, n - 8, "job %s: header of %" PRIu64 " bytes in a file of %zu", id, hl, n);
    json_t *h = json_loadb(p + 8, (size_t)hl, 0, NULL), *v;
    cr_assert_not_null(h, "job %s: the checkpoint's header is not JSON", id);
    const char *name;
    uint64_t end = 0;
    json_object_foreach(h, name, v) {
        if (strcmp(name, "__metadata__") == 0)
            continue;
        json_t *off = json_object_get(v, "data_offsets"), *dim;
        uint64_t b = (uint64_t)json_integer_value(json_array_get(off, 0));
        uint64_t e = (uint64_t)json_integer_value(json_array_get(off, 1));
        const char *dt = json_string_value(json_object_get(v, "dtype"));
        uint64_t bytes = dt && strcmp(dt, "F64") == 0 ? 8 : dt && strcmp(dt, "F32") == 0 ? 4 : 0;
        size_t k;
        json_array_foreach(json_object_get(v, "shape"), k, dim)
            bytes *= (uint64_t)json_integer_value(dim);
        cr_assert(json_array_size(off) == 2 && b <= e && e - b == bytes, "job %s: tensor %s (%s) has "
                  "offsets %" PRIu64 "..%" PRIu64, id, name, dt ? dt : "?", b, e);
        end = e > end ? e : end;
    }
    cr_assert_eq(8 + hl + end, n, "job %s: checkpoint of %zu bytes; its header says %" PRIu64, id, n,
                 8 + hl + end);
    json_t *md = json_object_get(h, "__metadata__");
    cr_assert_str_eq(json_string_value(json_object_get(md, "job_id")), id);
    const char *it = json_string_value(json_object_get(md, "iteration"));
    cr_assert_not_null(it, "job %s: the checkpoint has no iteration", id);
    long long out = strtoll(it, NULL, 10);
    json_decref(h);
    return out;
}

/* t's latest checkpoint as served, checked whole: its iteration, or -1 when it has none yet. */
static long long served_checkpoint(const struct tracked *t, char **bytes, size_t *n)
{
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/checkpoint", t->id);
    struct http_reply r;
    cr_assert(http(&C.d, "GET", path, NULL, NULL, &r), "GET %s", path);
    cr_assert(r.status == 200 || r.status == 404, "GET %s: %ld %s", path, r.status, r.body);
    long long it = r.status == 200 ? check_safetensors(t->id, r.body, r.body_len) : -1;
    if (bytes && r.status == 200) {
        *bytes = r.body;
        *n = r.body_len;
        r.body = NULL;
    }
    http_reply_free(&r);
    return it;
}

/* All of t's metrics: iterations 0, 1, ... once each, never fewer than its checkpoint covers. */
static size_t check_history(struct tracked *t)
{
    long long ckpt = served_checkpoint(t, NULL, NULL);   /* first: rows only grow past it */
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/metrics?limit=100000", t->id);
    json_t *m = get_json(&C.d, path, 200);
    check_page(t, m, 0);
    size_t rows = json_array_size(json_object_get(m, "rows"));
    json_decref(m);
    cr_assert_leq(ckpt, (long long)rows, "job %s: a checkpoint after %lld iterations, %zu metrics rows",
                  t->id, ckpt, rows);
    return rows;
}

/* Whether a checkpoint file name is a writer's temp name (core/checkpoint.c: <name>.tmp.XXXXXX). */
static bool is_temp_name(const char *name)
{
    return strstr(name, ".tmp") != NULL;
}

/*
 * Every folder under state/checkpoints is an acknowledged job's. With whole (every job idle):
 * no temp file, and each folder holds one file, the checkpoint its job serves.
 */
static void check_checkpoint_dirs(bool whole)
{
    char dir[400];
    char state[300];
    daemon_state_dir(&C.d, state, sizeof state);
    snprintf(dir, sizeof dir, "%s/checkpoints", state);
    DIR *top = opendir(dir);
    struct dirent *de;
    while (top && (de = readdir(top))) {
        if (de->d_name[0] == '.')
            continue;
        struct tracked *t = find_tracked(de->d_name);
        cr_assert_not_null(t, "%s/%s belongs to no job", dir, de->d_name);
        if (!whole)
            continue;
        char sub[700], file[1000];
        snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
        DIR *jd = opendir(sub);
        cr_assert_not_null(jd, "%s", sub);
        int files = 0;
        char names[400] = "";
        for (struct dirent *f; (f = readdir(jd));) {
            if (f->d_name[0] == '.')
                continue;
            cr_assert(!is_temp_name(f->d_name), "%s/%s: a temp file left behind", sub, f->d_name);
            snprintf(file, sizeof file, "%s/%s", sub, f->d_name);
            snprintf(names + strlen(names), sizeof names - strlen(names), " %s", f->d_name);
            files++;
        }
        closedir(jd);
        cr_assert_leq(files, 1, "%s holds%s; only the latest checkpoint is kept", sub, names);
        char *served = NULL;
        size_t n = 0;
        served_checkpoint(t, &served, &n);
        if (!files && !served)
            continue;   /* an empty folder: nothing to serve, nothing left over */
        FILE *fp = files ? fopen(file, "rb") : NULL;
        char *disk = malloc(n + 1);
        cr_assert(served && fp && disk && fread(disk, 1, n + 1, fp) == n && memcmp(disk, served, n) == 0,
                  "%s: not the checkpoint GET /jobs/%s/checkpoint serves", sub, t->id);
        fclose(fp);
        free(disk);
        free(served);
    }
    if (top)
        closedir(top);
}

/* Submissions whose answer a kill took are sent again; then every invariant is checked. */
static void check_all(void)
{
    for (int i = 0; i < C.n_jobs; i++)
        if (!C.job[i].id[0])
            cr_assert(post_tracked(&C.job[i]), "POST chaos-%d after a restart: no answer", C.job[i].n);
    check_listed();
    for (int i = 0; i < C.n_jobs; i++)
        check_history(&C.job[i]);
    check_checkpoint_dirs(false);
}

struct killer {
    pid_t pid;
    int after_ms;
    atomic_bool fired;
};

static void *killer_main(void *arg)
{
    struct killer *k = arg;
    sleep_ms(k->after_ms);
    kill(k->pid, SIGKILL);
    atomic_store(&k->fired, true);
    return NULL;
}

/* The client acts until a SIGKILL from another thread, at a random moment, ends the daemon; it starts again. */
static void one_kill(void)
{
    json_decref(get_json(&C.d, "/healthz", 200));
    struct killer k = {.pid = C.d.pid, .after_ms = 20 + (int)rnd(380)};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, killer_main, &k), 0);
    while (!atomic_load(&k.fired))
        act_once();
    pthread_join(th, NULL);
    daemon_kill(&C.d);   /* reaps it */
    C.kills++;
    cr_assert(daemon_spawn(&C.d, NULL), "traind did not start after kill %d", C.kills);
}

/* No more kills: paused jobs are resumed and every job runs to its end. */
static void finish_all(void)
{
    for (double t0 = now_s(); now_s() - t0 < 120;) {
        check_listed();
        int open = 0;
        for (int i = 0; i < C.n_jobs; i++) {
            struct tracked *t = &C.job[i];
            open += !t->terminal[0];
            if (t->paused_seen) {
                t->paused_seen = false;
                control(t, "resume");
            }
        }
        if (!open)
            return;
        sleep_ms(50);
    }
    cr_assert_fail("jobs still running 120 s after the last kill");
}

/* Each job that succeeded did all its iterations with the uninterrupted run's losses, bit for bit. */
static void check_results(void)
{
    int done = 0;
    for (int i = 0; i < C.n_jobs; i++) {
        struct tracked *t = &C.job[i];
        size_t rows = check_history(t);
        if (strcmp(t->terminal, "failed") == 0) {
            char path[160];
            snprintf(path, sizeof path, "/jobs/%s", t->id);
            json_t *j = get_json(&C.d, path, 200);
            cr_assert_fail("job %s (shape %d) failed: %s", t->id, t->shape,
                           json_string_value(json_object_get(json_object_get(j, "error"), "message")));
        }
        if (strcmp(t->terminal, "succeeded") != 0)
            continue;
        done++;
        cr_assert_eq(rows, (size_t)shapes[t->shape].iterations, "job %s: %zu rows", t->id, rows);
        for (size_t k = 0; k < rows; k++)
            cr_assert_eq(t->loss[k], C.reference[t->shape][k],
                         "job %s (shape %d) iteration %zu: %.17g, %.17g uninterrupted", t->id, t->shape,
                         k, t->loss[k], C.reference[t->shape][k]);
    }
    cr_assert_geq(done, CHAOS_JOBS - CHAOS_CANCELS, "only %d jobs succeeded", done);
}

Test(chaos, sigkill_at_random_moments_loses_no_job_and_changes_no_result)
{
    const char *seed = getenv("TRAIND_CHAOS_SEED");
    C.rng = seed && *seed ? (uint32_t)strtoul(seed, NULL, 10) : (uint32_t)time(NULL) ^ (uint32_t)getpid();
    C.rng = C.rng ? C.rng : 1;
    uint32_t first = C.rng;
    fprintf(stderr, "chaos: seed %u (TRAIND_CHAOS_SEED=%u replays it)\n", first, first);
    double t0 = now_s();
    run_references();
    double t1 = now_s();
    cr_assert(gen_dctaxi(&C.d, "dev", CHAOS_ROWS, 2));
    snprintf(C.train, sizeof C.train, "%s/dev/part*.csv", C.d.dir);
    for (int i = 0; i < CHAOS_FIRST_JOBS; i++)
        submit_new();
    while (C.kills < CHAOS_KILLS) {
        one_kill();
        check_all();
    }
    double t2 = now_s();
    while (C.n_jobs < CHAOS_JOBS)
        submit_new();
    finish_all();
    check_all();
    check_results();
    check_checkpoint_dirs(true);
    fprintf(stderr, "chaos: %d kills survived, seed %u (references %.1f s, kills %.1f s, to the end %.1f s)\n",
            C.kills, first, t1 - t0, t2 - t1, now_s() - t2);
}
