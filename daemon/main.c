/* main.c — the traind executable: configuration, the libuv loop, and wiring the daemon to the API. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "cfg.h"
#include "job.h"
#include "log.h"
#include "scheduler.h"
#include "server.h"
#include "traind_config.h"

/* Everything the running daemon holds, so the signal handler can take it down in order. */
struct daemon {
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    struct cfg cfg;
    struct job_registry *reg;
    struct sched *sched;
    struct api_server *api;
    int stopping;
};

static void on_signal(uv_signal_t *h, int signum)
{
    struct daemon *d = h->data;
    if (d->stopping)
        return;
    d->stopping = 1;
    log_info("%s: stopping (running jobs are cancelled at their next step)", strsignal(signum));
    api_server_close(d->api);
    sched_shutdown(d->sched);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
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
    return rc;
}

static int serve(struct daemon *d)
{
    struct err e = {0};
    struct sched_config sc = {
        .cpu_workers = d->cfg.cpu_workers,
        .data_roots = (const char *const *)d->cfg.data_roots,
        .n_data_roots = d->cfg.n_data_roots,
    };
    int rc = uv_loop_init(&d->loop);
    if (rc) {
        log_error("uv_loop_init: %s", uv_strerror(rc));
        return 1;
    }
    int status = 1;
    if (!(d->reg = job_registry_new(&e)) || sched_start(&d->loop, d->reg, &sc, &d->sched, &e)) {
        log_error("%s", e.msg);
        goto out;
    }
    struct api_ctx ctx = {.reg = d->reg, .sched = d->sched};
    if (api_server_start(&d->loop, d->cfg.listen, &ctx, &d->api, &e)) {
        log_error("%s", e.msg);
        goto out;
    }
    if ((rc = start_signals(d))) {
        log_error("uv_signal: %s", uv_strerror(rc));
        goto out;
    }
    int port = api_server_port(d->api);
    log_info("traind %s listening on %.*s:%d (%d CPU worker%s, %zu data root%s)", TRAIND_VERSION,
             (int)(strrchr(d->cfg.listen, ':') - d->cfg.listen), d->cfg.listen, port,
             d->cfg.cpu_workers, d->cfg.cpu_workers == 1 ? "" : "s", d->cfg.n_data_roots,
             d->cfg.n_data_roots == 1 ? "" : "s");
    for (size_t i = 0; i < d->cfg.n_data_roots; i++)
        log_debug("data root: %s", d->cfg.data_roots[i]);
    if (d->cfg.port_file[0] && write_port_file(d->cfg.port_file, port)) {
        log_error("cannot write the port file %s: %s", d->cfg.port_file, strerror(errno));
        goto out;
    }
    uv_run(&d->loop, UV_RUN_DEFAULT);
    status = 0;
out:
    if (!d->stopping) {
        d->stopping = 1;
        api_server_close(d->api);
        sched_shutdown(d->sched);
        if (d->sigint.data)
            uv_close((uv_handle_t *)&d->sigint, NULL);
        if (d->sigterm.data)
            uv_close((uv_handle_t *)&d->sigterm, NULL);
    }
    uv_run(&d->loop, UV_RUN_DEFAULT); /* runs the close callbacks */
    api_server_free(d->api);
    sched_free(d->sched);
    job_registry_free(d->reg);
    if (uv_loop_close(&d->loop))
        log_warn("the event loop still had open handles at exit");
    log_info("stopped");
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
    if (action == CFG_HELP) {
        cfg_usage(argv[0], stdout);
        cfg_free(&d.cfg);
        return 0;
    }
    if (action == CFG_VERSION) {
        printf("traind %s\n", TRAIND_VERSION);
        cfg_free(&d.cfg);
        return 0;
    }
    log_set_level(d.cfg.log_level);
    signal(SIGPIPE, SIG_IGN);
    int status = serve(&d);
    cfg_free(&d.cfg);
    return status;
}
