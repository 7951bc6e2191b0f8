/* err.c — filling and naming struct err. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int err_set(struct err *e, int code, const char *fmt, ...)
{
    if (!e)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
    return code;
}

int err_prefix(struct err *e, const char *fmt, ...)
{
    if (!e)
        return ERR_INTERNAL;
    char head[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    if (n < 0)
        return e->code;
    /* Compose in a buffer big enough for both, then keep what fits. */
    char both[2 * sizeof e->msg + 2];
    snprintf(both, sizeof both, "%s: %s", head, e->msg);
    size_t len = strnlen(both, sizeof e->msg - 1);
    memcpy(e->msg, both, len);
    e->msg[len] = '\0';
    return e->code;
}

void err_relative_to(struct err *e, const char *dir)
{
    if (!e || !dir)
        return;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    if (n == 0 || (n == 1 && dir[0] == '/'))
        return;
    for (char *at = e->msg; (at = strstr(at, dir)) != NULL;) {
        if (strncmp(at, dir, n) != 0 || at[n] != '/') {
            at++;
            continue;
        }
        memmove(at, at + n + 1, strlen(at + n + 1) + 1);
    }
}

void err_clear(struct err *e)
{
    if (e) {
        e->code = ERR_OK;
        e->msg[0] = '\0';
    }
}

const char *err_code_name(int code)
{
    switch (code) {
    case ERR_OK: return "ok";
    case ERR_INVALID_ARG: return "invalid_argument";
    case ERR_NOMEM: return "out_of_memory";
    case ERR_IO: return "io_error";
    case ERR_INVALID_DATA: return "invalid_data";
    case ERR_DATA_UNAVAILABLE: return "data_unavailable";
    case ERR_AUTH: return "auth_failed";
    case ERR_OUT_OF_MEMORY: return "out_of_memory";
    case ERR_DIVERGED: return "diverged";
    case ERR_DEVICE: return "device_error";
    case ERR_CANCELLED: return "cancelled";
    default: return "internal";
    }
}
