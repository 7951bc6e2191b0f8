/* s3.c — S3 requests: addressing, SigV4 headers for libcurl, ListObjectsV2 pages, S3 error documents. */
#include "s3.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

struct s3_client {
    struct http_client *http;
    char *endpoint;        /* custom endpoint without trailing '/', or NULL for AWS */
    char *region;
    char *provider;        /* "aws:amz:REGION:s3" */
    bool anonymous;
    char *access_key, *secret_key, *session_token;
    char *fixed_date;
    int max_keys;
    uint64_t list_max_bytes, list_max_keys;
};

static char *dup_or_env(const char *v, const char *env1, const char *env2)
{
    if (!v || !*v)
        v = env1 ? getenv(env1) : NULL;
    if ((!v || !*v) && env2)
        v = getenv(env2);
    return v && *v ? strdup(v) : NULL;
}

void s3_client_free(struct s3_client *c)
{
    if (!c)
        return;
    http_client_free(c->http);
    free(c->endpoint);
    free(c->region);
    free(c->provider);
    free(c->access_key);
    if (c->secret_key)
        memset(c->secret_key, 0, strlen(c->secret_key));
    free(c->secret_key);
    free(c->session_token);
    free(c->fixed_date);
    free(c);
}

int s3_client_new(const struct s3_config *cfg, const struct http_options *ho, struct s3_client **out,
                  struct err *e)
{
    *out = NULL;
    struct s3_client *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(e, ERR_NOMEM, "s3 client: out of memory");
    c->anonymous = cfg->anonymous;
    c->max_keys = cfg->max_keys > 0 ? cfg->max_keys : 1000;
    c->list_max_bytes = cfg->list_max_bytes;
    c->list_max_keys = cfg->list_max_keys;
    c->endpoint = dup_or_env(cfg->endpoint, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
    c->region = dup_or_env(cfg->region, "AWS_DEFAULT_REGION", "AWS_REGION");
    if (!c->region)
        c->region = strdup("us-east-1");
    if (cfg->fixed_date)
        c->fixed_date = strdup(cfg->fixed_date);
    if (!c->anonymous) {
        c->access_key = dup_or_env(cfg->access_key, "AWS_ACCESS_KEY_ID", NULL);
        c->secret_key = dup_or_env(cfg->secret_key, "AWS_SECRET_ACCESS_KEY", NULL);
        c->session_token = dup_or_env(cfg->session_token, "AWS_SESSION_TOKEN", NULL);
    }
    size_t plen = strlen("aws:amz::s3") + (c->region ? strlen(c->region) : 0) + 1;
    c->provider = malloc(plen);
    if (!c->region || !c->provider || (cfg->fixed_date && !c->fixed_date)) {
        s3_client_free(c);
        return err_set(e, ERR_NOMEM, "s3 client: out of memory");
    }
    snprintf(c->provider, plen, "aws:amz:%s:s3", c->region);
    if (c->endpoint) {
        size_t n = strlen(c->endpoint);
        while (n > 0 && c->endpoint[n - 1] == '/')
            c->endpoint[--n] = '\0';
        if (strncmp(c->endpoint, "http://", 7) != 0 && strncmp(c->endpoint, "https://", 8) != 0) {
            s3_client_free(c);
            return err_set(e, ERR_INVALID_ARG, "s3 endpoint must start with http:// or https://");
        }
    }
    if (!c->anonymous && (!c->access_key || !c->secret_key)) {
        s3_client_free(c);
        return err_set(e, ERR_AUTH, "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                       "or anonymous for a public bucket");
    }
    int rc = http_client_new(ho, &c->http, e);
    if (rc != ERR_OK) {
        s3_client_free(c);
        return rc;
    }
    *out = c;
    return ERR_OK;
}

struct http_client *s3_client_http(struct s3_client *c)
{
    return c->http;
}

/* ---- encoding and addressing ---- */

char *s3_uri_encode(const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1);
    if (!out)
        return NULL;
    char *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char ch = *p;
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
            ch == '_' || ch == '.' || ch == '~' || (keep_slash && ch == '/')) {
            *o++ = (char)ch;
        } else {
            *o++ = '%';
            *o++ = hex[ch >> 4];
            *o++ = hex[ch & 15];
        }
    }
    *o = '\0';
    return out;
}

struct encoded_param {
    char *name, *value;
};

static int cmp_param(const void *a, const void *b)
{
    const struct encoded_param *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

char *s3_query_build(const struct s3_param *p, size_t n)
{
    struct encoded_param *v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return NULL;
    char *out = NULL;
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        v[i].name = s3_uri_encode(p[i].name, false);
        v[i].value = s3_uri_encode(p[i].value ? p[i].value : "", false);
        if (!v[i].name || !v[i].value)
            goto done;
        total += strlen(v[i].name) + strlen(v[i].value) + 2;
    }
    /* SigV4 sorts by code point of the encoded names; strcmp on ASCII is exactly that. */
    qsort(v, n, sizeof *v, cmp_param);
    out = malloc(total);
    if (!out)
        goto done;
    char *o = out;
    for (size_t i = 0; i < n; i++)
        o += sprintf(o, "%s%s=%s", i ? "&" : "", v[i].name, v[i].value);
    *o = '\0';
done:
    for (size_t i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].value);
    }
    free(v);
    return out;
}

/* Virtual-hosted names must be valid DNS labels for TLS: dotted buckets go path-style. */
static bool virtual_hostable(const char *bucket)
{
    return strchr(bucket, '.') == NULL;
}

char *s3_url(const struct s3_client *c, const char *bucket, const char *key, const char *query)
{
    char *ekey = s3_uri_encode(key, true);
    char *ebucket = s3_uri_encode(bucket, false);
    char *url = NULL;
    if (ekey && ebucket) {
        const char *q = query && *query ? "?" : "";
        const char *qs = query && *query ? query : "";
        int n;
        if (c->endpoint)
            n = asprintf(&url, "%s/%s/%s%s%s", c->endpoint, ebucket, ekey, q, qs);
        else if (virtual_hostable(bucket))
            n = asprintf(&url, "https://%s.s3.%s.amazonaws.com/%s%s%s", ebucket, c->region, ekey, q, qs);
        else
            n = asprintf(&url, "https://s3.%s.amazonaws.com/%s/%s%s%s", c->region, ebucket, ekey, q, qs);
        if (n < 0)
            url = NULL;
    }
    free(ekey);
    free(ebucket);
    return url;
}

/* ---- the few bits of XML S3 sends ---- */

/* The text of the first <tag>...</tag> in [from, end), or NULL. S3 escapes '<' in text, so this is exact. */
static const char *xml_find(const char *from, const char *end, const char *tag, size_t *len)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = memmem(from, (size_t)(end - from), open, strlen(open));
    if (!a)
        return NULL;
    a += strlen(open);
    const char *b = memmem(a, (size_t)(end - a), close, strlen(close));
    if (!b)
        return NULL;
    *len = (size_t)(b - a);
    return a;
}

static size_t utf8_put(char *o, unsigned long cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F)); return 4;
}

/* Decodes the five named entities and numeric references into out (at most out_size - 1 bytes). */
static void xml_text(const char *s, size_t n, char *out, size_t out_size)
{
    static const struct { const char *name; char ch; } named[] = {
        {"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''},
    };
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < out_size;) {
        if (s[i] != '&') {
            out[o++] = s[i++];
            continue;
        }
        bool done = false;
        for (size_t k = 0; k < sizeof named / sizeof named[0] && !done; k++) {
            size_t l = strlen(named[k].name);
            if (n - i - 1 >= l && memcmp(s + i + 1, named[k].name, l) == 0) {
                out[o++] = named[k].ch;
                i += 1 + l;
                done = true;
            }
        }
        if (!done && i + 2 < n && s[i + 1] == '#') {
            bool hexa = s[i + 2] == 'x';
            size_t j = i + (hexa ? 3 : 2);
            unsigned long cp = 0;
            size_t digits = 0;
            while (j < n && s[j] != ';' && digits < 8) {
                char ch = s[j];
                int d = ch >= '0' && ch <= '9' ? ch - '0'
                      : hexa && ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                      : hexa && ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
                if (d < 0)
                    break;
                cp = cp * (hexa ? 16 : 10) + (unsigned long)d;
                j++, digits++;
            }
            if (j < n && s[j] == ';' && digits > 0 && cp > 0 && cp <= 0x10FFFF) {
                o += utf8_put(out + o, cp);
                i = j + 1;
                done = true;
            }
        }
        if (!done)
            out[o++] = s[i++];
    }
    out[o] = '\0';
}

/* Like xml_text, into a malloc'ed string sized for it. */
static char *xml_text_dup(const char *s, size_t n)
{
    char *out = malloc(n + 5);
    if (out)
        xml_text(s, n, out, n + 5);
    return out;
}

void s3_parse_error(const char *xml, char *code, size_t code_size, char *msg, size_t msg_size)
{
    code[0] = msg[0] = '\0';
    if (!xml)
        return;
    const char *end = xml + strlen(xml);
    size_t n;
    const char *v = xml_find(xml, end, "Code", &n);
    if (v && code_size > 5)
        xml_text(v, n, code, code_size);
    v = xml_find(xml, end, "Message", &n);
    if (v && msg_size > 5)
        xml_text(v, n, msg, msg_size);
}

/* The S3 error codes we tell apart, named in our words: a server's own text never reaches a job's error. */
static const struct {
    const char *code;
    int rc;
} s3_codes[] = {
    {"AccessDenied", ERR_AUTH},           {"InvalidAccessKeyId", ERR_AUTH},
    {"SignatureDoesNotMatch", ERR_AUTH},  {"ExpiredToken", ERR_AUTH},
    {"InvalidToken", ERR_AUTH},           {"TokenRefreshRequired", ERR_AUTH},
    {"AuthorizationHeaderMalformed", ERR_AUTH}, {"AllAccessDisabled", ERR_AUTH},
    {"NoSuchBucket", ERR_DATA_UNAVAILABLE}, {"NoSuchKey", ERR_DATA_UNAVAILABLE},
};

/*
 * Turns an HTTP failure into its kind when S3 sent an <Error> document: the status and, for a code
 * of the table, that code (the table's copy). The server's Message, and a code we do not know, are
 * left out: error messages never repeat what a remote server wrote.
 */
static int s3_error(const struct http_result *r, int rc, const char *what, struct err *e)
{
    char code[64], msg[8];
    s3_parse_error(r->body, code, sizeof code, msg, sizeof msg);
    if (!code[0])
        return rc;
    for (size_t i = 0; i < sizeof s3_codes / sizeof s3_codes[0]; i++)
        if (strcmp(code, s3_codes[i].code) == 0)
            return err_set(e, s3_codes[i].rc, "%s: HTTP %ld %s (%s)", what, r->status, s3_codes[i].code,
                           s3_codes[i].rc == ERR_AUTH ? "auth_failed" : "not found");
    return err_set(e, rc, "%s: HTTP %ld (an S3 error the server explains in its own words, not repeated here)",
                   what, r->status);
}

/* ---- requests ---- */

struct signed_request {
    struct http_request rq;
    const char *headers[4];
    char sha_header[96];
    char *token_header;
    char date_header[64];
};

static int sign(const struct s3_client *c, const char *url, const char *display, struct signed_request *s,
                struct err *e)
{
    memset(s, 0, sizeof *s);
    s->rq.url = url;
    s->rq.display = display;
    if (c->anonymous)
        return ERR_OK;
    /* S3 wants the payload hash as a header; curl 7.88 signs it but does not add it. GETs carry no body. */
    char hex[65];
    sha256_hex("", 0, hex);
    snprintf(s->sha_header, sizeof s->sha_header, "x-amz-content-sha256: %s", hex);
    s->headers[s->rq.n_headers++] = s->sha_header;
    if (c->session_token) {
        if (asprintf(&s->token_header, "x-amz-security-token: %s", c->session_token) < 0) {
            s->token_header = NULL;
            return err_set(e, ERR_NOMEM, "out of memory");
        }
        s->headers[s->rq.n_headers++] = s->token_header;
    }
    if (c->fixed_date) {
        snprintf(s->date_header, sizeof s->date_header, "X-Amz-Date: %s", c->fixed_date);
        s->headers[s->rq.n_headers++] = s->date_header;
    }
    s->rq.headers = s->headers;
    s->rq.aws_sigv4 = c->provider;
    s->rq.user = c->access_key;
    s->rq.password = c->secret_key;
    return ERR_OK;
}

static void signed_request_free(struct signed_request *s)
{
    free(s->token_header);
}

/* GetObject into path, or into memory: the whole object, or with range ("bytes=A-B") at most max bytes of it. */
static int get_object(struct s3_client *c, const char *bucket, const char *key, const char *path, const char *range,
                      size_t max, struct http_result *r, struct err *e)
{
    memset(r, 0, sizeof *r);
    char what[512];
    snprintf(what, sizeof what, "s3://%s/%s", bucket, key);
    char *url = s3_url(c, bucket, key, NULL);
    if (!url)
        return err_set(e, ERR_NOMEM, "out of memory");
    struct signed_request s;
    int rc = sign(c, url, what, &s, e);
    if (rc == ERR_OK) {
        if (range) {
            s.headers[s.rq.n_headers++] = range;
            s.rq.headers = s.headers;
        }
        rc = path ? http_get_file(c->http, &s.rq, path, r, e) : http_get_mem_max(c->http, &s.rq, max, r, e);
        if (rc != ERR_OK && r->status >= 300)
            rc = s3_error(r, rc, what, e);
    }
    signed_request_free(&s);
    free(url);
    return rc;
}

int s3_get_mem(struct s3_client *c, const char *bucket, const char *key, struct http_result *r, struct err *e)
{
    return get_object(c, bucket, key, NULL, NULL, SIZE_MAX, r, e);
}

int s3_get_file(struct s3_client *c, const char *bucket, const char *key, const char *path,
                struct http_result *r, struct err *e)
{
    return get_object(c, bucket, key, path, NULL, 0, r, e);
}

int s3_get_range(struct s3_client *c, const char *bucket, const char *key, uint64_t off, size_t len,
                 struct http_result *r, struct err *e)
{
    char range[80];
    snprintf(range, sizeof range, "Range: bytes=%llu-%llu", (unsigned long long)off,
             (unsigned long long)(off + len - 1));
    return get_object(c, bucket, key, NULL, range, len, r, e);
}

void s3_listing_free(struct s3_listing *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].key);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static int cmp_object(const void *a, const void *b)
{
    return strcmp(((const struct s3_object *)a)->key, ((const struct s3_object *)b)->key);
}

int s3_list_parse_page(const char *xml, size_t len, const char *dir, const char *glob, struct s3_listing *out,
                       size_t *cap, uint64_t *keys_left, char **token, const char *what, struct err *e)
{
    const char *end = xml + len;
    if (!memmem(xml, len, "<ListBucketResult", strlen("<ListBucketResult")))
        return err_set(e, ERR_DATA_UNAVAILABLE, "%s: the response is not a ListBucketResult", what);
    size_t dlen = strlen(dir);
    const char *p = xml;
    size_t n;
    const char *block;
    while ((block = xml_find(p, end, "Contents", &n)) != NULL) {
        const char *bend = block + n;
        p = bend;
        if (*keys_left == 0)   /* s3_list says which limit */
            return err_set(e, ERR_INVALID_DATA, "%s: too many objects", what);
        --*keys_left;
        size_t kl, sl, el;
        const char *k = xml_find(block, bend, "Key", &kl);
        const char *sz = xml_find(block, bend, "Size", &sl);
        const char *et = xml_find(block, bend, "ETag", &el);
        if (!k || !sz)
            return err_set(e, ERR_DATA_UNAVAILABLE, "%s: a listed object has no Key or Size", what);
        char *key = xml_text_dup(k, kl);
        if (!key)
            return err_set(e, ERR_NOMEM, "out of memory");
        /* The prefix asked for makes every key start with dir; the glob judges the rest. */
        if (strncmp(key, dir, dlen) != 0 || fnmatch(glob, key + dlen, FNM_PATHNAME | FNM_PERIOD) != 0) {
            free(key);
            continue;
        }
        if (out->n == *cap) {
            size_t nc = *cap ? 2 * *cap : 64;
            struct s3_object *v = realloc(out->v, nc * sizeof *v);
            if (!v) {
                free(key);
                return err_set(e, ERR_NOMEM, "out of memory");
            }
            out->v = v;
            *cap = nc;
        }
        struct s3_object *o = &out->v[out->n++];
        memset(o, 0, sizeof *o);
        o->key = key;
        char num[32];
        xml_text(sz, sl < sizeof num - 5 ? sl : sizeof num - 5, num, sizeof num);
        o->size = strtoull(num, NULL, 10);
        if (et)
            xml_text(et, el, o->etag, sizeof o->etag);
    }
    *token = NULL;
    const char *tr = xml_find(xml, end, "IsTruncated", &n);
    if (tr && n == 4 && memcmp(tr, "true", 4) == 0) {
        const char *t = xml_find(xml, end, "NextContinuationToken", &n);
        if (!t || n == 0)
            return err_set(e, ERR_DATA_UNAVAILABLE, "%s: truncated listing without a continuation token", what);
        *token = xml_text_dup(t, n);
        if (!*token)
            return err_set(e, ERR_NOMEM, "out of memory");
    }
    return ERR_OK;
}

size_t s3_glob_literal_len(const char *glob)
{
    return strcspn(glob, "*?[\\");
}

int s3_list(struct s3_client *c, const char *bucket, const char *dir, const char *glob,
            struct s3_listing *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    size_t literal = s3_glob_literal_len(glob);
    char *prefix = NULL;
    if (asprintf(&prefix, "%s%.*s", dir, (int)literal, glob) < 0)
        return err_set(e, ERR_NOMEM, "out of memory");
    char what[512];
    snprintf(what, sizeof what, "s3://%s/%s (ListObjectsV2)", bucket, prefix);
    char max_keys[16];
    snprintf(max_keys, sizeof max_keys, "%d", c->max_keys);

    size_t cap = 0;
    char *token = NULL;
    int rc = ERR_OK;
    uint64_t bytes_left = c->list_max_bytes ? c->list_max_bytes : UINT64_MAX;
    uint64_t keys_left = c->list_max_keys ? c->list_max_keys : UINT64_MAX;
    do {
        struct s3_param p[4] = {
            {"list-type", "2"}, {"prefix", prefix}, {"max-keys", max_keys}, {"continuation-token", token},
        };
        char *query = s3_query_build(p, token ? 4 : 3);
        char *url = query ? s3_url(c, bucket, "", query) : NULL;
        free(query);
        if (!url) {
            rc = err_set(e, ERR_NOMEM, "out of memory");
            break;
        }
        struct signed_request s;
        struct http_result r;
        memset(&r, 0, sizeof r);
        rc = sign(c, url, what, &s, e);
        if (rc == ERR_OK) {
            rc = http_get_mem_max(c->http, &s.rq, bytes_left < SIZE_MAX ? (size_t)bytes_left : SIZE_MAX, &r, e);
            if (rc != ERR_OK && r.status >= 300)
                rc = s3_error(&r, rc, what, e);
            else if (rc == ERR_INVALID_DATA)
                rc = err_set(e, ERR_INVALID_DATA, "%s: the listing is larger than %llu bytes (--list-max-bytes)",
                             what, (unsigned long long)c->list_max_bytes);
            bytes_left -= rc == ERR_OK ? r.body_len : 0;
        }
        free(token);
        token = NULL;
        if (rc == ERR_OK)
            rc = s3_list_parse_page(r.body, r.body_len, dir, glob, out, &cap, &keys_left, &token, what, e);
        if (rc == ERR_INVALID_DATA && keys_left == 0)
            rc = err_set(e, ERR_INVALID_DATA, "%s: the listing names more than %llu objects (--list-max-keys)",
                         what, (unsigned long long)c->list_max_keys);
        http_result_free(&r);
        signed_request_free(&s);
        free(url);
    } while (rc == ERR_OK && token);
    free(token);
    free(prefix);
    if (rc != ERR_OK) {
        s3_listing_free(out);
        return rc;
    }
    if (out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, cmp_object);
    return ERR_OK;
}
