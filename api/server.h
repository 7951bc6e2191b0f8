/* server.h — the HTTP server: libmicrohttpd in external mode, driven by the libuv loop. */
#ifndef TRAIND_API_SERVER_H
#define TRAIND_API_SERVER_H

#include <uv.h>

#include "err.h"
#include "routes.h"

struct api_server;

struct api_server_config {
    const char *listen;               /* "127.0.0.1:8470", "[::1]:8470"; port 0 binds a free one */
    const char *token;                /* bearer token every request but /healthz needs; NULL: none */
    int timeout_s;                    /* idle connections, and request headers still arriving */
    size_t response_memory_max;       /* bytes response bodies not yet sent may hold (a streamed
                                         metrics page counts 96 KiB); 0: no limit */
};

int api_server_start(uv_loop_t *loop, const struct api_server_config *cfg, const struct api_ctx *ctx,
                     struct api_server **out, struct err *e);
int api_server_port(const struct api_server *s);

/* Stops accepting, drops connections, closes the uv handles; free once the loop ran. */
void api_server_close(struct api_server *s);
void api_server_free(struct api_server *s);

#endif
