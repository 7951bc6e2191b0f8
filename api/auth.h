/* auth.h — bearer tokens (api_token_*): loading the token file and checking a request's Authorization header. */
#ifndef TRAIND_API_AUTH_H
#define TRAIND_API_AUTH_H

#include <stdbool.h>

#include "err.h"

/* The longest token accepted, in bytes. */
#define API_TOKEN_MAX 1024

/*
 * Reads the token from path: a regular file no one but its owner and group can read
 * (ERR_AUTH otherwise, saying so), holding one non-empty line. *out is malloc'd.
 */
int api_token_load(const char *path, char **out, struct err *e);

/* Whether authorization is "Bearer <token>"; the comparison takes the same time wherever it differs. */
bool api_token_ok(const char *token, const char *authorization);

#endif
