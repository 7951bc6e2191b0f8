/*
 * mpi_world.c — a world of traind processes under mpirun for the mpi and mpi_gpu tests
 * (mpi_world.h): rank 0 and its followers found by the rank in their environment.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobs.h"
#include "mpi_world.h"

struct world_proc W;


/* Skips the test without mpirun or a traind built with MPI; under CI=true fails instead. */
static void need_mpi(void)
{
    const char *mpirun = getenv("MPIRUN");
    const char *built = getenv("TRAIND_MPI");
    if (mpirun && *mpirun && built && strcmp(built, "1") == 0)
        return;
    const char *why = !(mpirun && *mpirun) ? "mpirun is missing" : "traind was built without MPI";
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0)
        cr_assert_fail("%s, and CI=true needs this test: apt-get install openmpi-bin libopenmpi-dev "
                       "(scripts/deps), then meson setup --reconfigure", why);
    cr_skip_test("%s: apt-get install openmpi-bin libopenmpi-dev (scripts/deps)", why);
}

/* The pid of mpirun's child of rank `rank` (OMPI_COMM_WORLD_RANK in its environment), or 0. */
static pid_t rank_pid(pid_t mpirun, int rank)
{
    DIR *dir = opendir("/proc");
    struct dirent *de;
    pid_t found = 0;
    char want[48];
    snprintf(want, sizeof want, "OMPI_COMM_WORLD_RANK=%d", rank);
    while (dir && !found && (de = readdir(dir))) {
        char path[300], buf[8192];
        int ppid = 0;
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fscanf(f, "%*d (%*[^)]) %*c %d", &ppid) != 1)
            ppid = 0;
        fclose(f);
        if (ppid != mpirun)
            continue;
        snprintf(path, sizeof path, "/proc/%s/environ", de->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t at = 0; at < n; at += strlen(buf + at) + 1)
            if (strcmp(buf + at, want) == 0)
                found = (pid_t)atoi(de->d_name);
    }
    if (dir)
        closedir(dir);
    return found;
}

bool world_gone(pid_t pid)
{
    char path[64], st = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    if (fscanf(f, "%*d (%*[^)]) %c", &st) != 1)
        st = 0;
    fclose(f);
    return st == 'Z' || st == 'X';
}

/* One of mpirun's app contexts: n ranks of traind with the test's flags, data below root. */
static size_t app(const char **argv, size_t at, const char *n, const char *root, const char *const *common,
                  const char *const *extra)
{
    argv[at++] = "-np";
    argv[at++] = n;
    argv[at++] = getenv("TRAIND_BIN");
    for (int i = 0; common[i]; i++)
        argv[at++] = common[i];
    argv[at++] = "--data-root";
    argv[at++] = root;
    for (int i = 0; extra && extra[i]; i++)
        argv[at++] = extra[i];
    return at;
}

/* The forked child becomes mpirun (argv), stderr appended to log_file, dying with the test process. */
_Noreturn static void exec_mpirun(const char *const *argv, const char *log_file)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* Open MPI refuses root (CI runs as root) unless told twice. */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    if (W.notify_path[0]) {   /* mpirun is the unit's main process: the watchdog is its */
        char self[24];
        snprintf(self, sizeof self, "%d", (int)getpid());
        setenv("NOTIFY_SOCKET", W.notify_path, 1);
        setenv("WATCHDOG_USEC", "400000", 1);
        setenv("WATCHDOG_PID", self, 1);
    }
    int devnull = open("/dev/null", O_RDWR);
    int log = open(log_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (devnull >= 0)
        dup2(devnull, STDIN_FILENO), dup2(devnull, STDOUT_FILENO);
    if (log >= 0)
        dup2(log, STDERR_FILENO);
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

bool world_start_on(int np, int workers, const char *const *extra, const char *follower_root)
{
    struct daemon_proc *d = &W.d;
    char port_file[300], log_file[300], state[300], npc[8], wc[8];
    snprintf(port_file, sizeof port_file, "%s/port", d->dir);
    snprintf(log_file, sizeof log_file, "%s/traind.log", d->dir);
    snprintf(npc, sizeof npc, "%d", follower_root ? np - 1 : np);
    snprintf(wc, sizeof wc, "%d", workers);
    daemon_state_dir(d, state, sizeof state);
    unlink(port_file);
    const char *const common[] = {"--listen", "127.0.0.1:0", "--port-file", port_file, "--state-dir", state,
                                  "--cpu-workers", wc, "--gpus", W.gpus, "--log-level", "debug", NULL};
    const char *argv[80] = {getenv("MPIRUN"), "--oversubscribe", "--mca", "btl", "self,tcp",
                            "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo",
                            "--mca", "pml", "ob1", "--bind-to", "none"};
    size_t n = 16;
    if (follower_root) {   /* MPMD: rank 0, then the others with their own data root */
        n = app(argv, n, "1", d->dir, common, extra);
        argv[n++] = ":";
        n = app(argv, n, npc, follower_root, common, extra);
    } else {
        n = app(argv, n, npc, d->dir, common, extra);
    }
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0)
        exec_mpirun(argv, log_file);
    if (pid < 0)
        return false;
    d->pid = pid;
    memset(W.ranks, 0, sizeof W.ranks);
    for (double t0 = now_s(); now_s() - t0 < 60; sleep_ms(20)) {
        for (int r = 0; r < np; r++)
            if (!W.ranks[r])
                W.ranks[r] = rank_pid(pid, r);
        FILE *f = fopen(port_file, "r");
        if (f) {
            int ok = fscanf(f, "%d", &d->port) == 1;
            fclose(f);
            if (ok && d->port > 0)
                return true;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            d->pid = 0;
            return false;
        }
    }
    return false;
}

bool world_start_with(int np, int workers)
{
    return world_start_on(np, workers, NULL, NULL);
}

bool world_start(int np)
{
    return world_start_with(np, 1);
}

/* Every process of the world goes, whatever state it is in. */
static void world_kill(void)
{
    for (int r = 0; r < MAX_RANKS; r++)
        if (W.ranks[r] > 0)
            kill(W.ranks[r], SIGKILL);
    daemon_kill(&W.d);
    memset(W.ranks, 0, sizeof W.ranks);
}

void world_setup(void)
{
    need_mpi();
    memset(&W, 0, sizeof W);
    W.gpus = "none";
    snprintf(W.d.dir, sizeof W.d.dir, "/tmp/traind-mpi-XXXXXX");
    cr_assert_not_null(mkdtemp(W.d.dir));
    cr_assert(gen_dctaxi(&W.d, "rep", 700, 3));
}

int world_stop(double timeout_s)
{
    kill(W.d.pid, SIGUSR1);
    for (double t0 = now_s(); now_s() - t0 < timeout_s; sleep_ms(10)) {
        int st;
        if (waitpid(W.d.pid, &st, WNOHANG) == W.d.pid) {
            W.d.pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
    }
    return -1;
}

void world_teardown(void)
{
    if (W.d.pid > 0)
        world_end_clean();
    world_kill();
    daemon_cleanup(&W.d);
}

void world_end_clean(void)
{
    int status = world_stop(30);
    if (status != 0)
        daemon_print_log(&W.d);
    cr_expect_eq(status, 0, "mpirun exited with status %d on SIGUSR1", status);
}

const char *world_spec_on(bool mlp, int n, int iterations, const char *device, const char *more)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"data\":{\"train\":\"%s/rep/part*.csv\"},\"model\":%s,\"loss\":\"mse\",\"optimizer\":%s,"
             "\"clip_grad_norm\":0.5,\"batch_size\":97,\"iterations\":%d,\"dtype\":\"float64\",\"seed\":0,"
             "\"replicas\":%d,\"device\":\"%s\"%s}",
             W.d.dir, mlp ? "{\"type\":\"mlp\",\"hidden\":[16,8]}" : "{\"type\":\"linear\"}",
             mlp ? "{\"type\":\"adam\",\"lr\":0.01}" : "{\"type\":\"sgd\",\"lr\":0.03}", iterations, n, device,
             more);
    return buf;
}

const char *world_spec_of(bool mlp, int n, int iterations, const char *more)
{
    return world_spec_on(mlp, n, iterations, "cpu", more);
}

void world_losses_of(const char *spec, double *loss, int n)
{
    char id[64];
    submit_job(&W.d, spec, id, sizeof id);
    world_expect_succeeded(id, 120);
    job_losses(&W.d, id, loss, (size_t)n);
}

void world_expect_close(const double *got, const double *want, int n, double tol, const char *what)
{
    for (int i = 0; i < n; i++)
        cr_expect(fabs(got[i] - want[i]) <= tol * fabs(want[i]),
                  "%s: iteration %d: loss %.17g, one replica's %.17g", what, i, got[i], want[i]);
}

void world_expect_succeeded(const char *id, double timeout_s)
{
    json_t *j = wait_job_done(&W.d, id, timeout_s);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
}

void world_hang_follower(const char *id)
{
    cr_assert_gt(W.ranks[1], 0, "rank 1's process was not found");
    kill(W.ranks[1], SIGSTOP);
    wait_job_state(&W.d, id, "queued", 60);
    kill(W.ranks[1], SIGCONT);
}

/* How many of the world's workers, on any rank, GET /devices shows holding job id. */
static int workers_holding(const char *id)
{
    json_t *d = get_json(&W.d, "/devices", 200);
    json_t *ranks = json_object_get(d, "ranks");
    int held = 0;
    for (size_t r = 0; r < json_array_size(ranks); r++) {
        json_t *workers = json_object_get(json_array_get(ranks, r), "workers");
        for (size_t k = 0; k < json_array_size(workers); k++) {
            const char *job = json_string_value(json_object_get(json_array_get(workers, k), "job"));
            held += job && strcmp(job, id) == 0;
        }
    }
    json_decref(d);
    return held;
}

/* Job id's state, progress.iteration and checkpoint.iteration (-1 without one) into st, at, ckpt. */
static void job_point(const char *id, char *st, size_t cap, long long *at, long long *ckpt)
{
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *j = get_json(&W.d, path, 200);
    const char *state = json_string_value(json_object_get(j, "state"));
    snprintf(st, cap, "%s", state ? state : "?");
    *at = json_integer_value(json_object_get(json_object_get(j, "progress"), "iteration"));
    json_t *c = json_object_get(json_object_get(j, "checkpoint"), "iteration");
    *ckpt = json_is_integer(c) ? json_integer_value(c) : -1;
    json_decref(j);
}

/* Pauses running job id and holds it paused, as world_paused_run says. */
static void pause_and_hold(const char *id, long long planned)
{
    job_action(&W.d, id, "pause", 202);
    wait_job_state(&W.d, id, "paused", 60);
    int held = 0;
    for (double t0 = now_s(); (held = workers_holding(id)) > 0 && now_s() - t0 < 30;)
        sleep_ms(20);
    cr_assert_eq(held, 0, "job %s is paused, but %d workers still hold it (GET /devices)", id, held);
    char st[32];
    long long at, ckpt;
    job_point(id, st, sizeof st, &at, &ckpt);
    cr_assert_lt(at, planned, "job %s ended before the pause; nothing was tested", id);
    cr_assert_gt(at, 0, "job %s was paused before its first step", id);
    cr_expect_eq(ckpt, at, "job %s paused at iteration %lld, its checkpoint at %lld", id, at, ckpt);
    for (double t0 = now_s(); now_s() - t0 < 1.0; sleep_ms(100)) {
        long long now_at, now_ckpt;
        job_point(id, st, sizeof st, &now_at, &now_ckpt);
        cr_assert_str_eq(st, "paused", "job %s left \"paused\" unasked", id);
        cr_assert_eq(now_at, at, "job %s, paused at iteration %lld, is at %lld", id, at, now_at);
        held = workers_holding(id);
        cr_assert_eq(held, 0, "job %s, paused, is held again by %d workers (GET /devices)", id, held);
    }
}

void world_paused_run(const char *spec, long long at, int planned, double *loss)
{
    char id[64];
    submit_job(&W.d, spec, id, sizeof id);
    wait_job_iterations(&W.d, id, at);
    pause_and_hold(id, planned);
    job_action(&W.d, id, "resume", 202);
    world_expect_succeeded(id, 120);
    job_losses(&W.d, id, loss, planned);
}
