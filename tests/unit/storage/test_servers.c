/* test_servers.c — spawning and stopping the node test servers, temp directories, plain GETs for assertions. */
#include "test_servers.h"

#include <curl/curl.h>
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SERVERS_DIR
#error "SERVERS_DIR must name tests/servers"
#endif

bool test_under_ci(void)
{
    const char *ci = getenv("CI");
    return ci && strcmp(ci, "true") == 0;
}

bool test_have_node(void)
{
    const char *path = getenv("PATH");
    if (!path)
        return false;
    char *copy = strdup(path);
    if (!copy)
        return false;
    bool found = false;
    for (char *save = NULL, *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char full[4096];
        snprintf(full, sizeof full, "%s/node", d);
        found = access(full, X_OK) == 0;
    }
    free(copy);
    return found;
}

void test_no_proxy(void)
{
    setenv("no_proxy", "*", 1);
    setenv("NO_PROXY", "*", 1);
}

void test_s3_credentials(void)
{
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    unsetenv("AWS_SESSION_TOKEN");
}

bool test_server_tmpdir(struct test_server *s)
{
    const char *base = getenv("TMPDIR");
    snprintf(s->tmp, sizeof s->tmp, "%s/traind-objstore-XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(s->tmp) != NULL;
}

enum test_server_start test_server_start(struct test_server *s, const char *script, const char *const *args,
                                         char *why, size_t why_size)
{
    s->pid = 0;
    s->stdin_fd = -1;
    s->port = 0;
    test_no_proxy();
    if (!test_have_node()) {
        snprintf(why, why_size, "node is not installed (scripts/deps installs nodejs and npm)");
        return TEST_SERVER_NO_NODE;
    }
    if (access(SERVERS_DIR "/node_modules/s3rver", F_OK) != 0) {
        snprintf(why, why_size, "tests/servers/node_modules is missing: run npm ci --prefix tests/servers");
        return TEST_SERVER_NO_NODE;
    }
    char script_path[4096];
    snprintf(script_path, sizeof script_path, "%s/%s", SERVERS_DIR, script);
    const char *argv[64] = {"node", script_path};
    size_t argc = 2;
    for (size_t i = 0; args && args[i] && argc < 63; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;

    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) {
        snprintf(why, why_size, "pipe: %s", strerror(errno));
        return TEST_SERVER_FAILED;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, why_size, "fork: %s", strerror(errno));
        return TEST_SERVER_FAILED;
    }
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]); close(in[1]); close(out[0]); close(out[1]);
        execvp("node", (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    s->pid = pid;
    s->stdin_fd = in[1];

    char line[128];
    size_t len = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (len < sizeof line - 1) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left_ms = 30000 - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        if (left_ms <= 0 || poll(&p, 1, (int)left_ms) <= 0)
            break;
        ssize_t n = read(out[0], line + len, 1);
        if (n <= 0)
            break;
        if (line[len] == '\n')
            break;
        len++;
    }
    line[len] = '\0';
    close(out[0]);
    if (sscanf(line, "PORT %d", &s->port) != 1 || s->port <= 0) {
        snprintf(why, why_size, "%s did not start (it printed \"%s\")", script, line);
        test_server_stop(s);
        return TEST_SERVER_FAILED;
    }
    return TEST_SERVER_STARTED;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    return remove(path);
}

void test_server_stop(struct test_server *s)
{
    if (s->stdin_fd >= 0) {
        close(s->stdin_fd);
        s->stdin_fd = -1;
    }
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        int status;
        waitpid(s->pid, &status, 0);
        s->pid = 0;
    }
    if (s->tmp[0]) {
        nftw(s->tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        s->tmp[0] = '\0';
    }
}

struct buf {
    char *p;
    size_t n;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    struct buf *b = arg;
    char *q = realloc(b->p, b->n + size * n + 1);
    if (!q)
        return 0;
    memcpy(q + b->n, p, size * n);
    b->n += size * n;
    q[b->n] = '\0';
    b->p = q;
    return size * n;
}

char *test_server_get(const struct test_server *s, const char *path)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    char url[4096];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    struct buf b = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    CURLcode cc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    if (cc != CURLE_OK) {
        free(b.p);
        return NULL;
    }
    return b.p ? b.p : strdup("");
}

long test_server_count(const struct test_server *s, const char *path)
{
    return test_server_count_method(s, path, NULL);
}

long test_server_count_method(const struct test_server *s, const char *path, const char *method)
{
    char q[2048];
    snprintf(q, sizeof q, "/__count?path=%s%s%s", path, method ? "&method=" : "", method ? method : "");
    char *body = test_server_get(s, q);
    if (!body)
        return -1;
    long n = strtol(body, NULL, 10);
    free(body);
    return n;
}

bool test_server_write(const struct test_server *s, const char *rel, const void *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", s->tmp, rel);
    for (char *p = path + strlen(s->tmp) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return false;
        *p = '/';
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}
