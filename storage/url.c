/* url.c — splitting a data URL into scheme, literal location and last-component glob. */
#include "store.h"

#include <stdlib.h>
#include <string.h>

static int has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* Splits "a/b/c*" at the last '/' into location "a/b" and pattern "c*". */
static int split_last(const char *path, struct store_url *u, struct err *e)
{
    const char *slash = strrchr(path, '/');
    const char *loc_end, *pat;
    if (!slash) {
        loc_end = NULL;
        pat = path;
    } else {
        loc_end = slash;
        pat = slash + 1;
    }
    if (!loc_end)
        u->location = strdup(".");
    else if (loc_end == path)
        u->location = strdup("/");
    else
        u->location = strndup(path, (size_t)(loc_end - path));
    u->pattern = strdup(*pat ? pat : "*");
    if (!u->location || !u->pattern) {
        store_url_free(u);
        return err_set(e, ERR_NOMEM, "out of memory parsing a URL");
    }
    return ERR_OK;
}

int store_url_parse(const char *url, struct store_url *u, struct err *e)
{
    memset(u, 0, sizeof *u);
    if (!url || !*url)
        return err_set(e, ERR_INVALID_ARG, "empty data URL");
    /* Remote schemes are parsed here so that store_list can say which one is missing. */
    if (has_prefix(url, "s3://")) {
        u->scheme = STORE_SCHEME_S3;
        return split_last(url + strlen("s3://"), u, e);
    }
    if (has_prefix(url, "http://") || has_prefix(url, "https://")) {
        /* user:pass@ would be echoed by every message that names the URL. */
        const char *auth = strstr(url, "://") + 3;
        if (memchr(auth, '@', strcspn(auth, "/?#")))
            return err_set(e, ERR_INVALID_ARG, "credentials in http(s) URLs are not supported");
        u->scheme = STORE_SCHEME_HTTP;
        return split_last(url, u, e);
    }
    const char *path = url;
    if (has_prefix(url, "file://")) {
        path = url + strlen("file://");
        /* RFC 8089: an empty authority or "localhost"; anything else names another machine. */
        if (has_prefix(path, "localhost/"))
            path += strlen("localhost");
        if (*path != '/')
            return err_set(e, ERR_INVALID_ARG, "file URL must be file:///absolute/path");
    } else if (strstr(url, "://")) {
        return err_set(e, ERR_INVALID_ARG, "unsupported URL scheme (use file://, or a path)");
    }
    if (!*path)
        return err_set(e, ERR_INVALID_ARG, "empty data path");
    u->scheme = STORE_SCHEME_FILE;
    return split_last(path, u, e);
}

void store_url_free(struct store_url *u)
{
    free(u->location);
    free(u->pattern);
    store_remote_free(u->remote);
    u->location = NULL;
    u->pattern = NULL;
    u->remote = NULL;
}
