/* handlers.h — handlers shared between routes.c and info.c inside api/ (not for other modules). */
#ifndef TRAIND_API_HANDLERS_H
#define TRAIND_API_HANDLERS_H

#include "routes.h"

/* status + body (a 500 when body is NULL: rendering ran out of memory). */
void api_ok(struct api_response *resp, unsigned status, json_t *body);

/* Whether req says its body is JSON; 0 with a 415 naming what in resp if not. */
int api_json_type_ok(const struct api_request *req, struct api_response *resp, const char *what);
/* The body as JSON, or NULL with a 400 invalid_json in resp. Jansson caps nesting at 2048 levels. */
json_t *api_json_parse(const char *body, size_t len, struct api_response *resp);

/* POST /jobs/{id}/predict: checks j here, and defers the prediction to the server's pool. */
void api_post_predict(const struct api_ctx *ctx, const struct job *j, const struct api_request *req,
                      struct api_response *resp);

void api_get_healthz(const struct api_ctx *ctx, struct api_response *resp);
void api_get_version(const struct api_ctx *ctx, struct api_response *resp);
void api_get_devices(const struct api_ctx *ctx, struct api_response *resp);
/* GET /: the dashboard page (static; it reads the API with the user's token). */
void api_get_dashboard(const struct api_ctx *ctx, struct api_response *resp);
/* GET /metrics: Prometheus text exposition format 0.0.4. */
void api_get_prometheus(const struct api_ctx *ctx, struct api_response *resp);

#endif
