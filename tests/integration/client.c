/* client.c — process control and a small libcurl client for the integration tests. */
#include "client.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int read_port(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int port = 0;
    if (fscanf(f, "%d", &port) != 1)
        port = 0;
    fclose(f);
    return port;
}

void daemon_state_dir(const struct daemon_proc *d, char *out, size_t cap)
{
    snprintf(out, cap, "%s.state", d->dir);
}

bool daemon_start(struct daemon_proc *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "/tmp/traind-it-XXXXXX");
    if (!mkdtemp(d->dir))
        return false;
    return daemon_spawn(d, NULL);
}

bool daemon_spawn(struct daemon_proc *d, const char *const *extra)
{
    return daemon_spawn_wait(d, extra, 30);
}

bool daemon_spawn_wait(struct daemon_proc *d, const char *const *extra, double timeout_s)
{
    const char *bin = getenv("TRAIND_BIN");
    if (!bin) {
        fprintf(stderr, "TRAIND_BIN is not set (meson sets it)\n");
        return false;
    }
    char port_file[300], log_file[300], state[300];
    snprintf(port_file, sizeof port_file, "%s/port", d->dir);
    snprintf(log_file, sizeof log_file, "%s/traind.log", d->dir);
    daemon_state_dir(d, state, sizeof state);
    unlink(port_file);
    const char *argv[32] = {bin, "--listen", "127.0.0.1:0", "--port-file", port_file, "--data-root",
                            d->dir, "--state-dir", state, "--log-level", "debug"};
    int n = 11;
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        /* Never outlive the test process, whatever happens to it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        int log = open(log_file, O_WRONLY | O_CREAT | O_APPEND, 0644);   /* restarts append */
        if (devnull >= 0)
            dup2(devnull, STDOUT_FILENO);   /* stdout carries the tests' TAP */
        if (log >= 0)
            dup2(log, STDERR_FILENO);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    d->pid = pid;
    d->port = 0;
    for (double t0 = now_s(); now_s() - t0 < timeout_s;) {
        if ((d->port = read_port(port_file)) > 0)
            return true;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            d->pid = 0;
            return false;
        }
        sleep_ms(1);   /* a start is timed by when the port appears (bench/state) */
    }
    return false;
}

void daemon_kill(struct daemon_proc *d)
{
    if (d->pid <= 0)
        return;
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
}

int daemon_stop(struct daemon_proc *d, double timeout_s)
{
    if (d->pid <= 0)
        return -1;
    kill(d->pid, SIGTERM);
    for (double t0 = now_s(); now_s() - t0 < timeout_s;) {
        int st;
        pid_t r = waitpid(d->pid, &st, WNOHANG);
        if (r == d->pid) {
            d->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        sleep_ms(10);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    return -1;
}

bool daemon_log_contains(const struct daemon_proc *d, const char *needle)
{
    char path[300];
    snprintf(path, sizeof path, "%s/traind.log", d->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[2048];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

void daemon_print_log(const struct daemon_proc *d)
{
    char path[300];
    snprintf(path, sizeof path, "%s/traind.log", d->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[1024];
    fprintf(stderr, "---- traind log ----\n");
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fclose(f);
}

void daemon_cleanup(struct daemon_proc *d)
{
    if (d->pid > 0) {
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        d->pid = 0;
    }
    if (d->dir[0]) {
        if (getenv("TRAIND_TEST_SHOW_LOG"))
            daemon_print_log(d);
        char cmd[700], state[300];
        daemon_state_dir(d, state, sizeof state);
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", d->dir, state);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", d->dir);
        d->dir[0] = '\0';
    }
}

struct buf {
    char *p;
    size_t n, cap;
};

/* buf_append doubles: a 10 MB metrics page arrives in ~600 pieces, and growing by each piece
 * copies gigabytes (under ASan, whose realloc always moves, long enough to time out). */
static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct buf *b = ud;
    size_t n = size * nmemb;
    return buf_append(&b->p, &b->n, &b->cap, ptr, n) ? 0 : n;
}

bool http(const struct daemon_proc *d, const char *method, const char *path,
          const char *content_type, const char *body, struct http_reply *r)
{
    return http_h(d, method, path, content_type, body, NULL, r);
}

bool http_h(const struct daemon_proc *d, const char *method, const char *path,
            const char *content_type, const char *body, const char *header, struct http_reply *r)
{
    memset(r, 0, sizeof *r);
    CURL *c = curl_easy_init();
    if (!c)
        return false;
    char url[512], ct[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", d->port, path);
    struct buf b = {0}, h = {0};
    struct curl_slist *hdrs = NULL;
    if (content_type) {
        snprintf(ct, sizeof ct, "Content-Type: %s", content_type);
        hdrs = curl_slist_append(hdrs, ct);
    } else if (body) {
        hdrs = curl_slist_append(hdrs, "Content-Type:");   /* send none at all */
    }
    if (header)
        hdrs = curl_slist_append(hdrs, header);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    else
        fprintf(stderr, "%s %s: %s\n", method, path, curl_easy_strerror(rc));
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    r->body = b.p ? b.p : strdup("");
    r->body_len = b.n;
    r->headers = h.p ? h.p : strdup("");
    r->json = json_loads(r->body, 0, NULL);
    return rc == CURLE_OK;
}

void http_reply_free(struct http_reply *r)
{
    free(r->body);
    free(r->headers);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

const char *http_header(const struct http_reply *r, const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *end = strstr(line, "\r\n");
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > n && strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            size_t vl = len - (size_t)(v - line);
            if (vl >= cap)
                vl = cap - 1;
            memcpy(buf, v, vl);
            buf[vl] = '\0';
            return buf;
        }
        line = end ? end + 2 : NULL;
    }
    return NULL;
}

bool gen_dctaxi(const struct daemon_proc *d, const char *sub, int rows, int parts)
{
    const char *gen = getenv("GEN_DCTAXI");
    if (!gen)
        return false;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --rows %d --partitions %d '%s/%s'", gen, rows, parts, d->dir, sub);
    return system(cmd) == 0;
}

bool gen_dctaxi_seed(const struct daemon_proc *d, const char *sub, int rows, int parts, int seed)
{
    const char *gen = getenv("GEN_DCTAXI");
    if (!gen)
        return false;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --rows %d --partitions %d --seed %d '%s/%s'", gen, rows, parts, seed,
             d->dir, sub);
    return system(cmd) == 0;
}

int run_traind(const char *const *args, char *out, size_t cap)
{
    const char *bin = getenv("TRAIND_BIN");
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)bin;
    for (; args[n - 1] && n < 15; n++)
        argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    int fds[2];
    if (!bin || pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        execv(bin, argv);
        _exit(127);
    }
    close(fds[1]);
    size_t got = 0;
    char sink[4096];
    ssize_t r;
    /* Read to the end even past cap, so the child never blocks on a full pipe. */
    while ((r = read(fds[0], got < cap - 1 ? out + got : sink,
                     got < cap - 1 ? cap - 1 - got : sizeof sink)) > 0)
        if (got < cap - 1)
            got += (size_t)r;
    out[got] = '\0';
    close(fds[0]);
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int raw_connect(const struct daemon_proc *d)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)d->port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

long raw_read_status(int fd, double timeout_s)
{
    char buf[256];
    size_t got = 0;
    for (double t0 = now_s(); got < 12 && now_s() - t0 < timeout_s;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) != 1)
            continue;
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    long status = 0;
    return sscanf(buf, "HTTP/1.%*d %ld", &status) == 1 ? status : 0;
}

long raw_status(const struct daemon_proc *d, const char *request, double timeout_s)
{
    int fd = raw_connect(d);
    if (fd < 0)
        return -1;
    size_t n = strlen(request);
    long status = send(fd, request, n, MSG_NOSIGNAL) == (ssize_t)n ? raw_read_status(fd, timeout_s) : -1;
    close(fd);
    return status;
}
