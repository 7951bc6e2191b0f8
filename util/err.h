/* err.h — the error value every library call returns up to the daemon: a code and a message. */
#ifndef TRAIND_UTIL_ERR_H
#define TRAIND_UTIL_ERR_H

/*
 * Library code (core/, storage/, gpu/) never exits or aborts on input a user can
 * get wrong: it fills a struct err and returns its code. The codes map one to one
 * onto the job error codes of the API (docs/api.md), so the daemon never has to
 * guess what a failure means.
 */
enum err_code {
    ERR_OK = 0,
    ERR_INVALID_ARG,      /* caller passed something impossible: shapes, dtypes, ranges */
    ERR_NOMEM,            /* host allocation failed */
    ERR_IO,               /* local file system */
    ERR_INVALID_DATA,     /* bad CSV: non-numeric field, ragged row, empty file */
    ERR_DATA_UNAVAILABLE, /* nothing matches, 404, network gone after retries */
    ERR_AUTH,             /* 401/403 from storage, or a path outside --data-root */
    ERR_OUT_OF_MEMORY,    /* device memory */
    ERR_DIVERGED,         /* non-finite loss */
    ERR_DEVICE,           /* CUDA / driver failure */
    ERR_CANCELLED,        /* the caller asked us to stop */
    ERR_INTERNAL,         /* a bug of ours */
};

struct err {
    int code;       /* enum err_code; ERR_OK when nothing failed */
    char msg[256];  /* for people: says what and where, never echoes file contents */
};

/* Sets e (which may be NULL) and returns code, so `return err_set(e, ...)` reads well. */
int err_set(struct err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to e->msg, for adding context on the way up. Returns e->code. */
int err_prefix(struct err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void err_clear(struct err *e);

/* Drops every "dir/" from e->msg, so the message names files relative to dir: a client is
 * told where a file is in the state dir or a data root, never the server's absolute path. */
void err_relative_to(struct err *e, const char *dir);

/* Stable snake_case name of a code, as used in the API's error.code. */
const char *err_code_name(int code);

#endif
