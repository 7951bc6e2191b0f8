/* handlers.h — handlers shared between routes.c and info.c inside api/ (not for other modules). */
#ifndef TRAIND_API_HANDLERS_H
#define TRAIND_API_HANDLERS_H

#include "routes.h"

/* status + body (a 500 when body is NULL: rendering ran out of memory). */
void api_ok(struct api_response *resp, unsigned status, json_t *body);

void api_get_healthz(const struct api_ctx *ctx, struct api_response *resp);
void api_get_version(const struct api_ctx *ctx, struct api_response *resp);
void api_get_devices(const struct api_ctx *ctx, struct api_response *resp);
/* GET /: the dashboard page (static; it reads the API with the user's token). */
void api_get_dashboard(const struct api_ctx *ctx, struct api_response *resp);
/* GET /metrics: Prometheus text exposition format 0.0.4. */
void api_get_prometheus(const struct api_ctx *ctx, struct api_response *resp);

#endif
