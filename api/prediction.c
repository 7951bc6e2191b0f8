/* prediction.c — POST /jobs/{id}/predict: checked on the loop thread, computed on the server's pool. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers.h"
#include "predict.h"
#include "spec.h"

/* What a prediction needs once the loop thread lets go: copies, as the job may be deleted meanwhile. */
struct predict_call {
    struct job_spec *spec;
    char *ckpt;
    char *state_dir;                  /* errors name the checkpoint relative to it; may be NULL */
    char *body;
    size_t body_len;
    size_t max_rows;
    char job[32];
};

static void call_free(void *arg)
{
    struct predict_call *pc = arg;
    if (!pc)
        return;
    spec_free(pc->spec);
    free(pc->ckpt);
    free(pc->state_dir);
    free(pc->body);
    free(pc);
}

/* rows: an array of arrays of numbers, all as wide as the model's input; into a flat buffer. */
static double *predict_input(const json_t *rows, int64_t features, struct api_response *resp)
{
    size_t n = json_array_size(rows);
    if (!json_is_array(rows) || n == 0) {
        api_error(resp, 400, "invalid_argument", "rows must be a non-empty array of rows, like [[1, 2, ...]]");
        return NULL;
    }
    double *x = malloc(n * (size_t)features * sizeof *x);
    if (!x) {
        api_error(resp, 500, "internal", "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *row = json_array_get(rows, i);
        if (!json_is_array(row) || (int64_t)json_array_size(row) != features) {
            api_error(resp, 400, "invalid_argument", "rows[%zu] must be an array of %lld numbers (the model's features)%s",
                      i, (long long)features, json_is_array(row) ? "" : ", not a single value");
            free(x);
            return NULL;
        }
        for (int64_t c = 0; c < features; c++) {
            const json_t *v = json_array_get(row, (size_t)c);
            if (!json_is_number(v) || !isfinite(json_number_value(v))) {
                api_error(resp, 400, "invalid_argument", "rows[%zu][%lld] must be a finite number", i,
                          (long long)c);
                free(x);
                return NULL;
            }
            x[i * (size_t)features + (size_t)c] = json_number_value(v);
        }
    }
    return x;
}

/* The "rows" of {"rows": [...]}, or NULL with a 400 or 413 in resp. */
static const json_t *rows_of(const json_t *root, size_t max_rows, struct api_response *resp)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v) {
        if (strcmp(key, "rows") != 0) {
            api_error(resp, 400, "invalid_argument", "unknown field '%.64s'; send {\"rows\": [[...], ...]}", key);
            return NULL;
        }
    }
    const json_t *rows = json_object_get(root, "rows");
    if (json_array_size(rows) > max_rows) {
        api_error(resp, 413, "payload_too_large", "at most %zu rows per request (--predict-max-rows), got %zu; "
                  "send them in parts", max_rows, json_array_size(rows));
        json_object_set_new(json_object_get(resp->body, "error"), "limit", json_integer((json_int_t)max_rows));
        return NULL;
    }
    return rows;
}

/* {"predictions": [...]}: one number per row for a single output, else one array of outputs per row. */
static json_t *predictions_json(const double *y, size_t n, int64_t outputs)
{
    json_t *out = json_array();
    for (size_t i = 0; out && i < n; i++) {
        json_t *row = outputs == 1 ? NULL : json_array();
        for (int64_t k = 0; k < outputs; k++) {
            double yk = y[i * (size_t)outputs + (size_t)k];
            json_t *val = isfinite(yk) ? json_real(yk) : json_null();
            if (row)
                json_array_append_new(row, val);
            else
                json_array_append_new(out, val);
        }
        if (row)
            json_array_append_new(out, row);
    }
    return out ? json_pack("{s:o}", "predictions", out) : NULL;
}

/* On a pool thread: parse, predict and render, so the loop only sends the text. */
static void predict_run(void *arg, struct api_response *resp)
{
    struct predict_call *pc = arg;
    struct err e = {0};
    int64_t features, outputs;
    if (predict_shape(pc->spec, pc->ckpt, &features, &outputs, &e)) {
        err_relative_to(&e, pc->state_dir);
        api_error(resp, 410, "gone", "the model of job %s cannot be read: %s", pc->job, e.msg);
        return;
    }
    json_t *root = api_json_parse(pc->body, pc->body_len, resp);
    const json_t *rows = root ? rows_of(root, pc->max_rows, resp) : NULL;
    size_t n = json_array_size(rows);
    double *x = rows ? predict_input(rows, features, resp) : NULL;
    double *y = x ? malloc(n * (size_t)outputs * sizeof *y) : NULL;
    json_decref(root);
    if (x && !y)
        api_error(resp, 500, "internal", "out of memory");
    if (y && predict_rows(pc->spec, pc->ckpt, x, (int64_t)n, features, y, &e)) {
        err_relative_to(&e, pc->state_dir);
        api_error(resp, e.code == ERR_INVALID_ARG ? 400 : 500,
                  e.code == ERR_INVALID_ARG ? "invalid_argument" : "internal", "%s", e.msg);
    } else if (y) {
        json_t *body = predictions_json(y, n, outputs);
        resp->text = body ? api_dump(body, &resp->text_len) : NULL;
        json_decref(body);
        if (resp->text) {
            resp->status = 200;
            resp->content_type = "application/json";
        } else {
            api_error(resp, 500, "internal", "out of memory rendering the predictions");
        }
    }
    free(x);
    free(y);
}

void api_post_predict(const struct api_ctx *ctx, const struct job *j, const struct api_request *req,
                      struct api_response *resp)
{
    const char *ckpt = NULL;
    if (job_state(j) != JOB_SUCCEEDED || job_latest_checkpoint(j, NULL, &ckpt) < 0) {
        api_error(resp, 409, "conflict", "job %s is %s; only a succeeded job has a model to predict with",
                  job_id(j), job_state_name(job_state(j)));
        return;
    }
    if (!api_json_type_ok(req, resp, "{\"rows\": [[...], ...]}"))
        return;
    struct predict_call *pc = calloc(1, sizeof *pc);
    struct spec_error se = {0};
    if (pc) {
        pc->spec = spec_dup(job_spec(j), &se);
        pc->ckpt = strdup(ckpt);
        pc->state_dir = ctx->cfg ? strdup(ctx->cfg->state_dir) : NULL;
        pc->body = malloc(req->body_len + 1);
    }
    if (!pc || !pc->spec || !pc->ckpt || !pc->body || (ctx->cfg && !pc->state_dir)) {
        api_error(resp, 500, "internal", "cannot hand the prediction over: %s",
                  pc && !pc->spec ? se.message : "out of memory");
        call_free(pc);
        return;
    }
    memcpy(pc->body, req->body, req->body_len + 1);
    pc->body_len = req->body_len;
    pc->max_rows = ctx->cfg ? ctx->cfg->predict_max_rows : CFG_PREDICT_MAX_ROWS;
    snprintf(pc->job, sizeof pc->job, "%s", job_id(j));
    resp->deferred.run = predict_run;
    resp->deferred.free = call_free;
    resp->deferred.arg = pc;
}
