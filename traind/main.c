/* main.c — the traind executable: configuration, the libuv loop, and wiring the daemon to the API. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "auth.h"
#include "cfg.h"
#include "comm_mpi.h"
#include "db.h"
#include "devices.h"
#include "job.h"
#include "log.h"
#include "notify.h"
#include "scheduler.h"
#include "spec.h"
#include "server.h"
#include "traind_config.h"
#include "world.h"
#if TRAIND_HAVE_CUDA
#include "be_cuda.h"
#include "bench_add.h"
#include "device.h"
#endif

#define FLUSH_INTERVAL_MS 200        /* metrics rows reach the database at least this often */
#define HEALTH_INTERVAL_MS 5000      /* worker heartbeats are checked at least this often */

/* Everything the running daemon holds, so the signal handler can take it down in order. */
struct daemon {
    uv_loop_t loop;
    uv_signal_t sigint, sigterm, sigusr1;
    uv_timer_t flush_timer, health_timer, linger_timer;
    struct cfg cfg;
    char *token;
    struct devices_info devices;
    struct db *db;
    struct job_registry *reg;
    struct sched *sched;
    struct api_server *api;
    struct comm_mpi *mpi;            /* under mpirun: this process's place in the world; NULL alone */
    struct world *world;             /* rank 0's view of the other ranks */
    int draining;                    /* SIGTERM seen: jobs are being stopped */
    int stopping;                    /* handles are being closed */
    uint64_t watchdog_usec;
};

static void notify(const char *state)
{
    struct err e = {0};
    if (notify_send(state, &e))
        log_warn("systemd notify (%s): %s", state, e.msg);
}

static void close_handle(uv_handle_t *h)
{
    if (h->data && !uv_is_closing(h))
        uv_close(h, NULL);
}

/* The last step of a stop: nothing runs any more, so close everything the loop waits on. */
static void stop_all(struct daemon *d)
{
    if (d->stopping)
        return;
    d->stopping = 1;
    api_server_close(d->api);
    world_quiet(d->world);   /* no follower's report may reach the scheduler once it closes */
    sched_shutdown(d->sched);
    close_handle((uv_handle_t *)&d->sigint);
    close_handle((uv_handle_t *)&d->sigterm);
    close_handle((uv_handle_t *)&d->sigusr1);
    close_handle((uv_handle_t *)&d->flush_timer);
    close_handle((uv_handle_t *)&d->health_timer);
    close_handle((uv_handle_t *)&d->linger_timer);
}

static void on_linger(uv_timer_t *h)
{
    stop_all(h->data);
}

static void on_drained(void *ctx)
{
    struct daemon *d = ctx;
    log_info("every running job is stopped and will resume at the next start");
    /*
     * TRAIND_TEST_LINGER_MS keeps serving (503 to new jobs) that long after the drain: a
     * hook for the integration tests, which cannot otherwise catch the draining window.
     */
    const char *linger = getenv("TRAIND_TEST_LINGER_MS");
    long ms = linger ? strtol(linger, NULL, 10) : 0;
    if (ms > 0 && ms <= 60000 && !d->stopping && uv_timer_init(&d->loop, &d->linger_timer) == 0) {
        d->linger_timer.data = d;
        if (uv_timer_start(&d->linger_timer, on_linger, (uint64_t)ms, 0) == 0)
            return;
    }
    stop_all(d);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct daemon *d = h->data;
    if (d->draining) {
        log_info("%s again: stopping now", strsignal(signum));
        stop_all(d);
        return;
    }
    d->draining = 1;
    notify("STOPPING=1");
    log_info("%s: stopping; new jobs are refused, running jobs stop at their next step and "
             "resume at the next start", strsignal(signum));
    sched_drain(d->sched, on_drained, d);
}

static void on_flush(uv_timer_t *h)
{
    struct daemon *d = h->data;
    struct err e = {0};
    db_flush(d->db, &e);   /* logs its own failures */
}

/* The watchdog is fed only while every worker shows life: a stuck one lets systemd restart us. */
static void on_health(uv_timer_t *h)
{
    struct daemon *d = h->data;
    if (sched_check_heartbeats(d->sched) && d->watchdog_usec)
        notify("WATCHDOG=1");
}

static int write_port_file(const char *path, int port)
{
    /* Written to a temp name and renamed, so a reader never sees a half-written port. */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    int ok = fprintf(f, "%d\n", port) > 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

static int start_signals(struct daemon *d)
{
    int rc = uv_signal_init(&d->loop, &d->sigint);
    if (rc)
        return rc;
    d->sigint.data = d;  /* data marks an initialised handle for the cleanup path */
    if ((rc = uv_signal_init(&d->loop, &d->sigterm)))
        return rc;
    d->sigterm.data = d;
    rc = uv_signal_start(&d->sigint, on_signal, SIGINT);
    if (!rc)
        rc = uv_signal_start(&d->sigterm, on_signal, SIGTERM);
    /*
     * Under mpirun, SIGUSR1 stops as SIGTERM does: mpirun passes SIGUSR1 on to every rank, while
     * on SIGTERM it kills them, SIGKILL following a second later (odls_base_sigkill_timeout),
     * too soon for a step to end and checkpoint.
     */
    if (!rc && d->mpi && !(rc = uv_signal_init(&d->loop, &d->sigusr1))) {
        d->sigusr1.data = d;
        rc = uv_signal_start(&d->sigusr1, on_signal, SIGUSR1);
    }
    return rc;
}

static int start_timers(struct daemon *d)
{
    int rc = uv_timer_init(&d->loop, &d->flush_timer);
    if (rc)
        return rc;
    d->flush_timer.data = d;
    if ((rc = uv_timer_init(&d->loop, &d->health_timer)))
        return rc;
    d->health_timer.data = d;
    /* Often enough to notice a silent worker within 1.5 heartbeat timeouts. */
    uint64_t health_ms = HEALTH_INTERVAL_MS;
    if ((uint64_t)d->cfg.heartbeat_timeout_s * 500 < health_ms)
        health_ms = (uint64_t)d->cfg.heartbeat_timeout_s * 500;
    d->watchdog_usec = notify_watchdog_usec();
    if (d->watchdog_usec && d->watchdog_usec / 2000 < health_ms)
        health_ms = d->watchdog_usec / 2000 ? d->watchdog_usec / 2000 : 1;
    rc = uv_timer_start(&d->flush_timer, on_flush, FLUSH_INTERVAL_MS, FLUSH_INTERVAL_MS);
    if (!rc)
        rc = uv_timer_start(&d->health_timer, on_health, health_ms, health_ms);
    return rc;
}

/* GPUs are looked for once, at start; without CUDA in the build the reason says so. */
static void discover_devices(struct devices_info *dv, const struct cfg *cfg)
{
    memset(dv, 0, sizeof *dv);
#if TRAIND_HAVE_CUDA
    dv->cuda_built = true;
    int n = 0;
    gpu_device_count(&n, dv->gpu_why, sizeof dv->gpu_why);
    gpu_versions(&dv->cuda_driver, &dv->cuda_runtime);
    dv->cublas_version = gpu_cublas_version;
    for (int i = n; i <= CFG_MAX_GPU_INDEX; i++)
        if (cfg->gpus != CFG_ALL_GPUS && cfg_uses_gpu(cfg, i))
            log_warn("--gpus: cuda:%d: no such GPU (this machine has %d)", i, n);
    for (int i = 0; i < n && dv->n_gpus < DEVICES_MAX_GPUS; i++) {
        struct gpu_device_info g;
        struct err e = {0};
        bool used = cfg_uses_gpu(cfg, i);
        /* A GPU left to others gets no context: describing it does not make one. */
        if (used ? gpu_device_query(i, &g, &e) : gpu_device_describe(i, &g, &e)) {
            log_warn("cuda:%d: %s", i, e.msg);
            continue;
        }
        struct devices_gpu *o = &dv->gpus[dv->n_gpus++];
        o->index = g.index;
        snprintf(o->name, sizeof o->name, "%s", g.name);
        o->cc_major = g.cc_major;
        o->cc_minor = g.cc_minor;
        o->sm_count = g.sm_count;
        o->mem_total = g.mem_total;
        o->mem_free = g.mem_free;
        snprintf(o->pci_bus_id, sizeof o->pci_bus_id, "%s", g.pci_bus_id);
        o->used = used;
    }
#else
    (void)cfg;
    snprintf(dv->gpu_why, sizeof dv->gpu_why, "built without CUDA");
#endif
}

/* The GPU workers' backends: gpu/'s CUDA backend, or none in a build without it. */
static const struct backend_factory *gpu_backends(void)
{
#if TRAIND_HAVE_CUDA
    return be_cuda_factory();
#else
    return NULL;
#endif
}

/* The database, the jobs it holds, and jobs a crash left `running` put back in the queue. */
static int open_state(struct daemon *d, struct err *e)
{
    if (db_open(d->cfg.state_dir, &d->db, e) || !(d->reg = job_registry_new(e)) ||
        db_load(d->db, d->reg, e))
        return e->code;
    db_attach(d->db, d->reg);
    log_info("state in %s: %zu job%s", d->cfg.state_dir, job_registry_count(d->reg),
             job_registry_count(d->reg) == 1 ? "" : "s");
    return 0;
}

/* What the scheduler, or a follower rank, runs its workers with. */
static struct sched_config sched_config_of(struct daemon *d)
{
    return (struct sched_config){
        .cpu_workers = d->cfg.cpu_workers,
        .data_roots = (const char *const *)d->cfg.data_roots,
        .n_data_roots = d->cfg.n_data_roots,
        .state_dir = d->cfg.state_dir,
        .cache_dir = d->cfg.cache_dir,
        .cache_limit = d->cfg.cache_limit,
        .list_limits = {.max_bytes = d->cfg.list_max_bytes, .max_keys = d->cfg.list_max_keys},
        .heartbeat_timeout_ms = (int64_t)d->cfg.heartbeat_timeout_s * 1000,
        .allreduce_timeout_s = d->cfg.allreduce_timeout_s,
        .devices = &d->devices,   /* filled by discover_devices below, before sched_start */
        .gpu_backends = gpu_backends(),
        .world = d->world,
    };
}

static int serve(struct daemon *d)
{
    struct err e = {0};
    struct sched_config sc = sched_config_of(d);
    int rc = uv_loop_init(&d->loop);
    if (rc) {
        log_error("uv_loop_init: %s", uv_strerror(rc));
        return 1;
    }
    discover_devices(&d->devices, &d->cfg);
    int used = 0;
    for (int i = 0; i < d->devices.n_gpus; i++)
        used += d->devices.gpus[i].used;
    if (d->devices.n_gpus == 0)
        log_info("no GPU: %s; training on the CPU", d->devices.gpu_why);
    else if (used == 0)
        log_info("--gpus leaves every GPU (%d) alone; training on the CPU", d->devices.n_gpus);
    int status = 1;
    if (open_state(d, &e) || sched_start(&d->loop, d->reg, &sc, &d->sched, &e)) {
        log_error("%s", e.msg);
        goto out;
    }
    sched_recover(d->sched);
    struct api_ctx ctx = {.reg = d->reg, .db = d->db, .sched = d->sched, .devices = &d->devices,
                          .cfg = &d->cfg, .world = d->world};
    struct api_server_config acfg = {
        .listen = d->cfg.listen, .token = d->token, .timeout_s = d->cfg.request_timeout_s,
        .response_memory_max = (size_t)d->cfg.response_memory_max,
    };
    if (api_server_start(&d->loop, &acfg, &ctx, &d->api, &e)) {
        log_error("%s", e.msg);
        goto out;
    }
    if ((rc = start_signals(d)) || (rc = start_timers(d))) {
        log_error("uv: %s", uv_strerror(rc));
        goto out;
    }
    int port = api_server_port(d->api);
    log_info("traind %s listening on %.*s:%d (%d CPU worker%s, %d GPU worker%s, %zu data root%s%s)",
             TRAIND_VERSION, (int)(strrchr(d->cfg.listen, ':') - d->cfg.listen), d->cfg.listen, port,
             d->cfg.cpu_workers, d->cfg.cpu_workers == 1 ? "" : "s", d->devices.n_gpus,
             d->devices.n_gpus == 1 ? "" : "s", d->cfg.n_data_roots,
             d->cfg.n_data_roots == 1 ? "" : "s", d->token ? ", bearer token required" : "");
    for (size_t i = 0; i < d->cfg.n_data_roots; i++)
        log_debug("data root: %s", d->cfg.data_roots[i]);
    if (d->cfg.port_file[0] && write_port_file(d->cfg.port_file, port)) {
        log_error("cannot write the port file %s: %s", d->cfg.port_file, strerror(errno));
        goto out;
    }
    sched_kick(d->sched);   /* jobs queued before the last stop go on */
    notify("READY=1");
    uv_run(&d->loop, UV_RUN_DEFAULT);
    status = 0;
out:
    stop_all(d);
    uv_run(&d->loop, UV_RUN_DEFAULT); /* runs the close callbacks */
    api_server_free(d->api);
    sched_free(d->sched);
    db_close(d->db);   /* after the scheduler, so the last rows and states are written */
    job_registry_free(d->reg);
    if (uv_loop_close(&d->loop))
        log_warn("the event loop still had open handles at exit");
    log_info("stopped");
    return status;
}

static int print_devices(const struct cfg *cfg)
{
    struct devices_info dv;
    discover_devices(&dv, cfg);
    json_t *o = devices_to_json(&dv);
    /* Every field GET /devices has: this process trains nothing, so no job is on any device. */
    json_object_set_new(json_object_get(o, "cpu"), "jobs", json_array());
    json_t *gpus = json_object_get(o, "gpus");
    for (size_t i = 0; i < json_array_size(gpus); i++)
        if (!json_object_get(json_array_get(gpus, i), "job"))
            json_object_set_new(json_array_get(gpus, i), "job", json_null());
    int rc = o && json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 ? 0 : 1;
    json_decref(o);
    printf("\n");
    return rc;
}

/* `traind bench add`: the PyTorch example's GPU-vs-CPU add benchmark as a table, on the
 * first GPU of --gpus (cuda:0 by default). */
static int bench_add(const struct cfg *cfg)
{
#if TRAIND_HAVE_CUDA
    char why[256] = "";
    int n = 0;
    gpu_device_count(&n, why, sizeof why);
    if (n == 0) {
        fprintf(stderr, "traind bench add: no GPU on this machine (%s)\n", why);
        return 1;
    }
    int device = 0;
    while (device < n && device <= CFG_MAX_GPU_INDEX && !(cfg->gpus >> device & 1))
        device++;
    if (device == n || device > CFG_MAX_GPU_INDEX) {
        fprintf(stderr, "traind bench add: --gpus names none of this machine's %d GPUs\n", n);
        return 1;
    }
    struct err e = {0};
    if (gpu_bench_add(stdout, device, &e)) {
        fprintf(stderr, "traind bench add: %s\n", e.msg);
        return 1;
    }
    return 0;
#else
    (void)cfg;
    fprintf(stderr, "traind bench add: this traind was built without CUDA (meson -Dcuda=enabled)\n");
    return 1;
#endif
}

/* traind spec-fields: the job spec's field list, which docs/spec.md carries verbatim; spec-schema:
 * the spec as a JSON Schema, which docs/openapi.yaml carries verbatim. */
static int print_spec_fields(bool schema)
{
    const char *missing = NULL;
    char *text = schema ? spec_json_schema_text(&missing) : spec_fields_markdown();
    if (!text && missing) {
        fprintf(stderr, "traind: the spec's field %s has no JSON Schema: give its form in "
                "train/spec_forms.c a schema\n", missing);
        return 1;
    }
    if (!text) {
        fprintf(stderr, "traind: out of memory\n");
        return 1;
    }
    fputs(text, stdout);
    free(text);
    return fflush(stdout) ? 1 : 0;
}

/*
 * Under mpirun every rank runs this binary with the same flags: rank 0 serves, the others follow
 * (world.h). Alone, the world is this process.
 */
static int run_world(struct daemon *d, int *argc, char ***argv)
{
    struct err e = {0};
    if (comm_mpi_init(argc, argv, &d->mpi, &e)) {
        log_error("%s", e.msg);
        return 1;
    }
    int status;
    if (comm_mpi_rank(d->mpi) != 0) {   /* no state dir, no token: those are rank 0's */
        struct sched_config sc = sched_config_of(d);
        discover_devices(&d->devices, &d->cfg);   /* its GPUs are offered to rank 0 too */
        status = world_follow(d->mpi, &sc);
    } else if (world_lead(d->mpi, d->cfg.cpu_workers, (int64_t)d->cfg.heartbeat_timeout_s * 1000, &d->world, &e)) {
        log_error("%s", e.msg);
        status = 1;
    } else if (cfg_check_state_dir(&d->cfg, &e) ||
               (d->cfg.token_file[0] && api_token_load(d->cfg.token_file, &d->token, &e))) {
        fprintf(stderr, "traind: %s\n", e.msg);
        status = 2;
    } else {
        if (d->mpi)
            log_info("rank 0 of a world of %d ranks", comm_mpi_size(d->mpi));
        status = serve(d);
    }
    world_end(d->world);   /* the followers exit too: MPI_Finalize waits for every rank */
    comm_mpi_finalize(d->mpi);
    return status;
}

int main(int argc, char **argv)
{
    struct daemon d;
    memset(&d, 0, sizeof d);
    struct err e = {0};
    enum cfg_action action;
    if (cfg_parse(argc, argv, &d.cfg, &action, &e)) {
        fprintf(stderr, "traind: %s\n\n", e.msg);
        cfg_usage(argv[0], stderr);
        return 2;
    }
    int status = 0;
    if (action == CFG_HELP)
        cfg_usage(argv[0], stdout);
    else if (action == CFG_VERSION)
        printf("traind %s\n", TRAIND_VERSION);
    else if (action == CFG_DEVICES)
        status = print_devices(&d.cfg);
    else if (action == CFG_SPEC_FIELDS || action == CFG_SPEC_SCHEMA)
        status = print_spec_fields(action == CFG_SPEC_SCHEMA);
    else if (action == CFG_BENCH_ADD)
        status = bench_add(&d.cfg);
    if (action != CFG_RUN) {
        cfg_free(&d.cfg);
        return status;
    }
    log_set_level(d.cfg.log_level);
    signal(SIGPIPE, SIG_IGN);
    /* A file past RLIMIT_FSIZE is a write that fails (EFBIG), answered 503, not a dead daemon. */
    signal(SIGXFSZ, SIG_IGN);
    status = run_world(&d, &argc, &argv);
    free(d.token);
    cfg_free(&d.cfg);
    return status;
}
