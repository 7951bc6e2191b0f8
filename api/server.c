/* server.c — libmicrohttpd in external epoll mode on the libuv loop, and the glue to routes. */
#include "server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "buf.h"
#include "history.h"
#include "log.h"
#include "pool.h"
#include "web.h"

/* Limits are explicit so a misbehaving client costs a bounded amount. */
#define API_CONNECTION_LIMIT 256
#define API_PER_IP_LIMIT 64          /* one address cannot take every connection */
#define API_CONNECTION_MEMORY 65536  /* per connection: request line and headers */
#define API_HEADER_TICK_MS 250       /* how often connections still sending headers are checked */

#define API_WAIT_TICK_MS 100         /* how often parked requests are checked for expiry */
#define API_STREAM_BLOCK 32768        /* MHD's buffer for a streamed body, beside the stream's own */

/*
 * Threads for predictions. Not the job's worker: a succeeded job has none, and the device
 * workers train other jobs, so a prediction queued there would wait for a whole run. Two
 * threads keep the loop free while bounding the cores that predictions take from training.
 */
#define API_POOL_THREADS 2

struct request_state;

/*
 * Per connection: when its current request began. MHD's own timeout only notices a
 * silent peer; one that sends a header or body byte every few seconds (slowloris) is
 * cut by this deadline instead.
 */
struct conn_state {
    struct MHD_Connection *conn;
    uint64_t since;                   /* uv_now() ms: connection start or end of the last request */
    bool in_request;                  /* headers and body arrived, the request is being handled */
    struct conn_state *prev, *next;
};

struct api_server {
    struct MHD_Daemon *mhd;
    uv_poll_t poll;                   /* MHD's epoll fd */
    uv_timer_t timer;                 /* MHD's own timeouts: keep-alive, slow bodies */
    uv_timer_t wait_timer;            /* expires parked long-poll requests */
    uv_timer_t header_timer;          /* cuts connections whose headers take too long */
    bool poll_open, timer_open, wait_timer_open, header_timer_open;
    struct api_ctx ctx;
    struct api_stats stats;
    char *token;                      /* NULL: no authentication */
    uint64_t timeout_ms;
    int port;
    struct request_state *waiters;    /* suspended long polls */
    struct conn_state *conns;         /* every open connection */
    size_t held, held_max;            /* bytes of response bodies not yet sent, and the most allowed */
    struct api_pool *pool;            /* runs the routes' deferred work */
};

/* Per request: the body as it arrives, the long-poll state, and work deferred to the pool. */
struct request_state {
    struct api_server *s;
    char *body;
    size_t len, cap;
    bool too_large;
    bool refused;                     /* answered before the body (401, 404, 405, 413) */
    bool resumed;                     /* the wait is over (time is up, or shutdown): answer now */
    struct MHD_Connection *conn;
    char wait_job[32];
    uint64_t deadline;                /* uv_now() ms */
    struct request_state *next_waiter;
    bool waiting;
    struct api_pool_item work;        /* deferred.run on the pool fills answer */
    struct api_deferred deferred;
    struct api_response answer;
    enum { WORK_NONE, WORK_QUEUED, WORK_DONE, WORK_DROPPED } work_state;
};

static void run_mhd(struct api_server *s);

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct api_server *s = h->data;
    if (status < 0)
        log_warn("http: poll error: %s", uv_strerror(status));
    run_mhd(s);
}

static void on_timer(uv_timer_t *h)
{
    run_mhd(h->data);
}

/* After every MHD_run the timer must be re-armed from MHD_get_timeout, or keep-alive hangs. */
static void run_mhd(struct api_server *s)
{
    if (!s->mhd)
        return;
    if (MHD_run(s->mhd) != MHD_YES)
        log_warn("http: MHD_run failed");
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(s->mhd, &ms) == MHD_YES)
        uv_timer_start(&s->timer, on_timer, (uint64_t)ms, 0);
    else
        uv_timer_stop(&s->timer);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    log_warn("http: %s", msg);
}

static const char *query_lookup(void *qctx, const char *key)
{
    return MHD_lookup_connection_value(qctx, MHD_GET_ARGUMENT_KIND, key);
}

struct nth_key {
    size_t want, at;
    const char *key;
};

static enum MHD_Result nth_key_step(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    (void)value;
    struct nth_key *n = cls;
    if (n->at++ != n->want)
        return MHD_YES;
    n->key = key;
    return MHD_NO;
}

static const char *query_key(void *qctx, size_t i)
{
    struct nth_key n = {.want = i};
    MHD_get_connection_values(qctx, MHD_GET_ARGUMENT_KIND, nth_key_step, &n);
    return n.key;
}

static void unlink_waiter(struct api_server *s, struct request_state *rs)
{
    for (struct request_state **p = &s->waiters; *p; p = &(*p)->next_waiter)
        if (*p == rs) {
            *p = rs->next_waiter;
            break;
        }
    rs->next_waiter = NULL;
    rs->waiting = false;
}

/*
 * MHD routes the request again on its next run; the timer makes that run happen now.
 * final: answer whatever there is; otherwise the route may park it again (a state
 * change with no new row), until the same deadline.
 */
static void resume(struct api_server *s, struct request_state *rs, bool final)
{
    unlink_waiter(s, rs);
    rs->resumed = final;
    MHD_resume_connection(rs->conn);
    uv_timer_start(&s->timer, on_timer, 0, 0);
}

static void on_wait_tick(uv_timer_t *h)
{
    struct api_server *s = h->data;
    uint64_t now = uv_now(h->loop);
    for (struct request_state *rs = s->waiters, *next; rs; rs = next) {
        next = rs->next_waiter;
        if (rs->deadline <= now)
            resume(s, rs, true);
    }
    if (!s->waiters)
        uv_timer_stop(&s->wait_timer);
}

/* The scheduler's listener: a job moved, so requests waiting on it answer now. */
static void on_job_changed(void *ctx, struct job *j)
{
    struct api_server *s = ctx;
    for (struct request_state *rs = s->waiters, *next; rs; rs = next) {
        next = rs->next_waiter;
        if (strcmp(rs->wait_job, job_id(j)) == 0)
            resume(s, rs, false);
    }
}

static enum MHD_Result park(struct api_server *s, struct MHD_Connection *c, struct request_state *rs,
                            const struct api_response *resp)
{
    rs->conn = c;
    snprintf(rs->wait_job, sizeof rs->wait_job, "%s", resp->wait_job);
    if (!rs->deadline)   /* parked again after a wake-up: the first deadline stands */
        rs->deadline = uv_now(s->wait_timer.loop) + resp->wait_ms;
    rs->next_waiter = s->waiters;
    rs->waiting = true;
    s->waiters = rs;
    if (!uv_is_active((uv_handle_t *)&s->wait_timer))
        uv_timer_start(&s->wait_timer, on_wait_tick, API_WAIT_TICK_MS, API_WAIT_TICK_MS);
    MHD_suspend_connection(c);
    return MHD_YES;
}

/*
 * A body in flight, counted in held until MHD lets go of it: slow readers hold at most
 * held_max between them, and a body past that is answered 503 instead.
 */
struct held_body {
    struct api_server *s;
    size_t bytes;
    char *text;                       /* or */
    struct hist_stream *stream;
};

static void release_body(void *cls)
{
    struct held_body *hb = cls;
    hb->s->held -= hb->bytes;
    free(hb->text);
    hist_stream_free(hb->stream);
    free(hb);
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct held_body *hb = cls;
    struct err e = {0};
    ssize_t n = hist_stream_read(hb->stream, buf, max, &e);
    if (n < 0)
        log_warn("http: a streamed page stopped: %s", e.msg);
    return n > 0 ? n : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static ssize_t read_nothing(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls, (void)pos, (void)buf, (void)max;
    return MHD_CONTENT_READER_END_OF_STREAM;
}

/*
 * The answer to HEAD of a streamed page: GET's headers (no Content-Length: the length is known
 * only once the page is sent), no body, and the stream dropped unread. Not chunked: MHD 0.9.75
 * ends a chunked answer to HEAD with the last chunk (`0\r\n\r\n`) after the headers, which
 * the client then reads as the start of its next answer; so the connection closes after it.
 */
static struct MHD_Response *head_of_stream(struct api_response *r)
{
    hist_stream_free(r->stream);
    r->stream = NULL;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64, read_nothing, NULL, NULL);
    if (resp && MHD_set_response_options(resp, MHD_RF_HTTP_VERSION_1_0_ONLY, MHD_RO_END) != MHD_YES) {
        MHD_destroy_response(resp);
        resp = NULL;
    }
    return resp;
}

/*
 * The MHD response for a body (text of len bytes, or r's stream), counted in held. NULL: out of
 * memory, or held_max reached, and then r is a 503 (an error's body always goes).
 */
static struct MHD_Response *held_response(struct api_server *s, struct api_response *r, char *text, size_t len)
{
    size_t bytes = r->stream ? API_STREAM_BLOCK + HIST_STREAM_BYTES : len;
    bool fits = r->status >= 400 || s->held + bytes <= s->held_max;
    struct held_body *hb = fits ? malloc(sizeof *hb) : NULL;
    if (!hb) {
        free(text);
        hist_stream_free(r->stream);
        r->stream = NULL;
        if (!fits)
            api_error(r, 503, "unavailable", "this answer (%zu bytes) and those not yet read by their clients "
                      "(%zu bytes) would pass --response-memory-max (%zu bytes); ask again later", bytes, s->held,
                      s->held_max);
        return NULL;
    }
    *hb = (struct held_body){.s = s, .bytes = bytes, .text = text, .stream = r->stream};
    r->stream = NULL;
    s->held += bytes;
    struct MHD_Response *resp =
        hb->stream ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, API_STREAM_BLOCK, read_stream, hb,
                                                       release_body)
                   : MHD_create_response_from_buffer_with_free_callback_cls(len, text, release_body, hb);
    if (!resp)
        release_body(hb);
    return resp;
}

/* The MHD response for r: a file, a text body, a stream or JSON. NULL on out of memory or with r a 503. */
static struct MHD_Response *make_response(struct api_server *s, struct api_response *r)
{
    struct MHD_Response *resp;
    if (r->has_file) {
        resp = MHD_create_response_from_fd64(r->file_size, r->file_fd);
        if (!resp)
            close(r->file_fd);
        r->has_file = false;
        if (resp) {
            char cd[160];
            snprintf(cd, sizeof cd, "attachment; filename=\"%s\"", r->filename);
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION, cd);
        }
        return resp;
    }
    if (r->text || r->stream) {
        resp = r->stream && r->head ? head_of_stream(r) : held_response(s, r, r->text, r->text_len);
        r->text = NULL;
        if (resp)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
        if (resp && strncmp(r->content_type, "text/html", 9) == 0) {
            /* The page loads nothing from anywhere and talks only to this daemon. */
            MHD_add_response_header(resp, "Content-Security-Policy", API_WEB_CSP);
            MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        }
        return resp;
    }
    size_t len = 0;
    char *text = r->body ? api_dump(r->body, &len) : NULL;
    json_decref(r->body);
    r->body = NULL;
    if (text)
        resp = held_response(s, r, text, len);
    else
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (resp)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return resp;
}

static enum MHD_Result send_response(struct api_server *s, struct MHD_Connection *c,
                                     struct api_response *r)
{
    struct MHD_Response *resp = make_response(s, r);
    if (!resp && r->status == 503 && r->body)
        resp = make_response(s, r);   /* held_max reached: the 503 instead */
    if (!resp)
        return MHD_NO;
    if (r->location[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, r->location);
    if (r->allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"traind\"");
    if (r->status == 503)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "5");
    enum MHD_Result rc = MHD_queue_response(c, r->status, resp);
    MHD_destroy_response(resp);
    if (r->status < API_MAX_STATUS)
        s->stats.responses[r->status]++;
    return rc;
}

static struct request_state *request_of(struct api_pool_item *it)
{
    return (struct request_state *)((char *)it - offsetof(struct request_state, work));
}

static void work_run(struct api_pool_item *it)
{
    struct request_state *rs = request_of(it);
    rs->deferred.run(rs->deferred.arg, &rs->answer);
}

/* The work is over (or never ran: shutdown): MHD routes the request again, and it answers. */
static void work_done(struct api_pool_item *it, bool ran)
{
    struct request_state *rs = request_of(it);
    rs->deferred.free(rs->deferred.arg);
    rs->deferred.arg = NULL;
    rs->work_state = ran ? WORK_DONE : WORK_DROPPED;
    MHD_resume_connection(rs->conn);
    uv_timer_start(&rs->s->timer, on_timer, 0, 0);
}

static enum MHD_Result defer(struct api_server *s, struct MHD_Connection *c, struct request_state *rs,
                             const struct api_response *resp)
{
    rs->conn = c;
    rs->deferred = resp->deferred;
    rs->work = (struct api_pool_item){.run = work_run, .done = work_done};
    rs->work_state = WORK_QUEUED;
    MHD_suspend_connection(c);
    api_pool_submit(s->pool, &rs->work);
    return MHD_YES;
}

/* The answer the pool filled in; 503 if it stopped first. */
static enum MHD_Result send_deferred(struct api_server *s, struct MHD_Connection *c, struct request_state *rs)
{
    if (rs->work_state == WORK_DROPPED)
        api_error(&rs->answer, 503, "unavailable", "traind is shutting down; send the request again once it is back");
    rs->work_state = WORK_NONE;
    enum MHD_Result rc = send_response(s, c, &rs->answer);
    json_decref(rs->answer.body);
    free(rs->answer.text);
    memset(&rs->answer, 0, sizeof rs->answer);
    return rc;
}

static enum MHD_Result too_large(struct api_server *s, struct MHD_Connection *c)
{
    struct api_response r = {0};
    api_error(&r, 413, "payload_too_large", "the body is larger than %d bytes", API_MAX_BODY);
    return send_response(s, c, &r);
}

static enum MHD_Result unauthorized(struct api_server *s, struct MHD_Connection *c, bool had_header)
{
    struct api_response r = {0};
    api_error(&r, 401, "unauthorized", "%s", had_header ? "the bearer token is not valid"
                                                        : "send 'Authorization: Bearer <token>'");
    return send_response(s, c, &r);
}

static struct conn_state *conn_state_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Whether the headers announce a body: a length above 0, or chunks. */
static bool announces_body(struct MHD_Connection *c)
{
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return (cl && strtoull(cl, NULL, 10) > 0) ||
           MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
}

/*
 * The first call, with the headers only: the token, the route and the announced length are
 * checked before a byte of body is read, so a client without the token, or sending where
 * nothing is taken, cannot make traind read (or wait for) a body.
 */
static enum MHD_Result on_headers(struct api_server *s, struct MHD_Connection *c, const char *url,
                                  const char *method, struct request_state *rs)
{
    /* The dashboard's files need no token: the page sends it itself, to the API. */
    const struct api_web_file *wf = api_web_find(url);
    if (wf && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)) {
        rs->refused = true;   /* answered from the headers: a body, if any, is dropped */
        unsigned status = 500;
        enum MHD_Result rc = (enum MHD_Result)api_web_send(c, wf, &status);
        s->stats.responses[status]++;
        return rc;
    }
    /* /healthz for probes. */
    if (s->token && strcmp(url, "/healthz") != 0 && !wf) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        if (!api_token_ok(s->token, auth)) {
            rs->refused = true;
            log_debug("http: %s %s -> 401", method, url);
            return unauthorized(s, c, auth != NULL);
        }
    }
    struct api_request head = {.method = method, .path = url, .query = query_lookup,
                               .query_key = query_key, .qctx = c};
    struct api_response r;
    if (api_route_admit(&head, announces_body(c), &r)) {
        rs->refused = true;
        log_debug("http: %s %s -> %u before the body", method, url, r.status);
        return send_response(s, c, &r);
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > API_MAX_BODY) {
        rs->refused = true;
        return too_large(s, c);
    }
    return MHD_YES;
}

static int append_body(struct request_state *rs, const char *data, size_t n)
{
    if (rs->len + n > API_MAX_BODY) {
        rs->too_large = true;
        return 0;
    }
    return buf_append(&rs->body, &rs->len, &rs->cap, data, n);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct api_server *s = cls;
    struct request_state *rs = *con_cls;
    if (!rs) {
        rs = calloc(1, sizeof *rs);
        if (!rs)
            return MHD_NO;
        rs->s = s;
        *con_cls = rs;
        return on_headers(s, c, url, method, rs);
    }
    if (rs->refused) {
        *upload_data_size = 0;   /* answered already: whatever body MHD still passes is dropped */
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!rs->too_large && append_body(rs, upload_data, *upload_data_size))
            return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    /* The whole request is here: the deadline on its arrival no longer applies. */
    struct conn_state *cs = conn_state_of(c);
    if (cs)
        cs->in_request = true;
    if (rs->work_state == WORK_DONE || rs->work_state == WORK_DROPPED)
        return send_deferred(s, c, rs);
    if (rs->too_large)
        return too_large(s, c);

    struct api_request req = {
        .method = method,
        .path = url,
        .content_type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
        .body = rs->body ? rs->body : "",
        .body_len = rs->len,
        .query = query_lookup,
        .query_key = query_key,
        .qctx = c,
        .no_wait = rs->resumed,
    };
    struct api_response resp;
    api_route(&s->ctx, &req, &resp);
    resp.head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    if (resp.deferred.run)
        return defer(s, c, rs, &resp);
    if (resp.wait_ms)
        return park(s, c, rs, &resp);
    log_debug("http: %s %s -> %u", method, url, resp.status);
    return send_response(s, c, &resp);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct api_server *s = cls;
    struct request_state *rs = *con_cls;
    struct conn_state *cs = conn_state_of(c);
    if (cs) {
        cs->in_request = false;   /* the next request's headers are on the clock from now */
        cs->since = uv_now(s->header_timer.loop);
    }
    if (rs) {
        if (rs->waiting)
            unlink_waiter(s, rs);
        json_decref(rs->answer.body);
        free(rs->answer.text);
        free(rs->body);
        free(rs);
        *con_cls = NULL;
    }
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct api_server *s = cls;
    struct conn_state *cs = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        cs = calloc(1, sizeof *cs);
        if (!cs)
            return;   /* then only MHD's idle timeout guards this one */
        cs->conn = c;
        cs->since = uv_now(s->header_timer.loop);
        cs->next = s->conns;
        if (s->conns)
            s->conns->prev = cs;
        s->conns = cs;
        *socket_context = cs;
        return;
    }
    if (!cs)
        return;
    if (cs->prev)
        cs->prev->next = cs->next;
    else
        s->conns = cs->next;
    if (cs->next)
        cs->next->prev = cs->prev;
    free(cs);
    *socket_context = NULL;
}

/*
 * A connection still short of complete headers past the timeout is shut down: MHD then
 * reads end-of-file on its next run and closes it the ordinary way (it owns the fd).
 */
static void on_header_tick(uv_timer_t *h)
{
    struct api_server *s = h->data;
    uint64_t now = uv_now(h->loop);
    for (struct conn_state *cs = s->conns; cs; cs = cs->next) {
        if (cs->in_request || now - cs->since < s->timeout_ms)
            continue;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(cs->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci && shutdown(ci->connect_fd, SHUT_RDWR) == 0)
            log_debug("http: closed a connection whose request took over %llu s to arrive",
                      (unsigned long long)(s->timeout_ms / 1000));
        cs->since = now;   /* once is enough; MHD closes it on its next run */
    }
    run_mhd(s);
}

/* "127.0.0.1:8470" or "[::1]:8470" into a socket address. */
static int parse_listen(const char *listen, struct sockaddr_storage *ss, bool *v6, struct err *e)
{
    char host[64];
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen)
        return err_set(e, ERR_INVALID_ARG, "--listen wants HOST:PORT, got '%s'", listen);
    size_t hn = (size_t)(colon - listen);
    const char *h = listen;
    if (h[0] == '[' && hn >= 2 && h[hn - 1] == ']') {
        h++;
        hn -= 2;
    }
    if (hn >= sizeof host)
        return err_set(e, ERR_INVALID_ARG, "--listen: host too long");
    memcpy(host, h, hn);
    host[hn] = '\0';
    if (strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || port < 0 || port > 65535)
        return err_set(e, ERR_INVALID_ARG, "--listen: bad port in '%s'", listen);
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *v6 = false;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *v6 = true;
        return 0;
    }
    return err_set(e, ERR_INVALID_ARG, "--listen: '%s' is not an IPv4 or IPv6 address", host);
}

int api_server_start(uv_loop_t *loop, const struct api_server_config *cfg, const struct api_ctx *ctx,
                     struct api_server **out, struct err *e)
{
    struct sockaddr_storage ss;
    bool v6 = false;
    const char *listen = cfg->listen;
    if (parse_listen(listen, &ss, &v6, e))
        return e->code;
    struct api_server *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, ERR_NOMEM, "http: out of memory");
    if (cfg->token && !(s->token = strdup(cfg->token))) {
        free(s);
        return err_set(e, ERR_NOMEM, "http: out of memory");
    }
    unsigned timeout_s = cfg->timeout_s > 0 ? (unsigned)cfg->timeout_s : 30;
    s->timeout_ms = (uint64_t)timeout_s * 1000;
    s->held_max = cfg->response_memory_max ? cfg->response_memory_max : SIZE_MAX;
    s->ctx = *ctx;
    s->ctx.stats = &s->stats;
    uv_timer_init(loop, &s->header_timer);   /* first: the connection callbacks read its clock */
    s->header_timer_open = true;
    s->header_timer.data = s;
    unsigned flags = MHD_USE_ERROR_LOG | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    if (v6)
        flags |= MHD_USE_IPv6;
    s->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,   /* first, so every message goes through it */
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)API_CONNECTION_LIMIT,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)API_PER_IP_LIMIT,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)API_CONNECTION_MEMORY,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_END);
    if (!s->mhd) {
        *out = s;
        api_server_close(s);
        return err_set(e, ERR_IO, "http: cannot listen on %s (in use, or not an address of this host?)",
                       listen);
    }
    const union MHD_DaemonInfo *fdi = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    const union MHD_DaemonInfo *pi = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    int rc = fdi ? uv_poll_init(loop, &s->poll, fdi->epoll_fd) : UV_EINVAL;
    if (rc) {
        *out = s;
        api_server_close(s);
        return err_set(e, ERR_INTERNAL, "http: watching MHD's epoll fd: %s", uv_strerror(rc));
    }
    s->poll_open = true;
    s->poll.data = s;
    uv_timer_init(loop, &s->timer);
    s->timer_open = true;
    s->timer.data = s;
    uv_timer_init(loop, &s->wait_timer);
    s->wait_timer_open = true;
    s->wait_timer.data = s;
    sched_set_listener(ctx->sched, on_job_changed, s);
    s->port = pi ? pi->port : 0;
    if (api_pool_start(loop, API_POOL_THREADS, &s->pool, e)) {
        *out = s;
        api_server_close(s);
        return e->code;
    }
    rc = uv_poll_start(&s->poll, UV_READABLE, on_poll);
    if (!rc)
        rc = uv_timer_start(&s->header_timer, on_header_tick, API_HEADER_TICK_MS, API_HEADER_TICK_MS);
    if (rc) {
        *out = s;
        api_server_close(s);
        return err_set(e, ERR_INTERNAL, "http: uv_poll_start: %s", uv_strerror(rc));
    }
    run_mhd(s);
    *out = s;
    return 0;
}

int api_server_port(const struct api_server *s)
{
    return s->port;
}

void api_server_close(struct api_server *s)
{
    if (!s)
        return;
    sched_set_listener(s->ctx.sched, NULL, NULL);
    /* MHD must not be stopped with suspended connections: the pool resumes its requests as it
     * closes (after the predictions running finish), and the long polls answer now. */
    api_pool_close(s->pool);
    if (s->mhd) {
        while (s->waiters)
            resume(s, s->waiters, true);
        MHD_run(s->mhd);
    }
    if (s->wait_timer_open) {
        uv_timer_stop(&s->wait_timer);
        uv_close((uv_handle_t *)&s->wait_timer, NULL);
        s->wait_timer_open = false;
    }
    if (s->poll_open) {
        uv_poll_stop(&s->poll);
        uv_close((uv_handle_t *)&s->poll, NULL);
        s->poll_open = false;
    }
    if (s->timer_open) {
        uv_timer_stop(&s->timer);
        uv_close((uv_handle_t *)&s->timer, NULL);
        s->timer_open = false;
    }
    if (s->header_timer_open) {
        uv_timer_stop(&s->header_timer);
        uv_close((uv_handle_t *)&s->header_timer, NULL);
        s->header_timer_open = false;
    }
    if (s->mhd) {
        MHD_stop_daemon(s->mhd);
        s->mhd = NULL;
    }
}

void api_server_free(struct api_server *s)
{
    if (!s)
        return;
    api_pool_free(s->pool);
    free(s->token);
    free(s);
}
