/* log.c — leveled log lines on stderr with UTC timestamps. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/*
 * The one piece of process-wide mutable state in traind: the threshold is a
 * property of the process (like stderr itself), written once before threads start.
 */
static _Atomic int log_threshold = LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const char *const level_tags[] = {"ERROR", "WARN ", "INFO ", "DEBUG"};

void log_set_level(enum log_level lvl)
{
    atomic_store(&log_threshold, (int)lvl);
}

enum log_level log_get_level(void)
{
    return (enum log_level)atomic_load(&log_threshold);
}

int log_level_parse(const char *name, enum log_level *out)
{
    for (int i = 0; i <= LOG_DEBUG; i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    if (strcasecmp(name, "warning") == 0) {
        *out = LOG_WARN;
        return 0;
    }
    return -1;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
    if ((int)lvl > atomic_load(&log_threshold))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);

    /* Format the whole line first so concurrent threads never interleave inside it. */
    char msg[1024], line[1024 + 64];
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int n = snprintf(line, sizeof line, "%s.%03ldZ %s ", stamp, ts.tv_nsec / 1000000L,
                     level_tags[lvl]);
    if (n < 0 || m < 0)
        return;
    log_escape(msg, line + n, sizeof line - (size_t)n);
    fprintf(stderr, "%s\n", line);
}

/*
 * A job's name, a URL or a file name from a spec can hold a newline or a terminal escape:
 * written as they are they would forge log lines or rewrite the operator's screen.
 */
size_t log_escape(const char *in, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && cap > 0; p++) {
        char esc[5] = {0};
        if (*p == '\n' || *p == '\r' || *p == '\t')
            esc[0] = '\\', esc[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
        else if (*p < 0x20 || *p == 0x7f)
            esc[0] = '\\', esc[1] = 'x', esc[2] = hex[*p >> 4], esc[3] = hex[*p & 15];
        else
            esc[0] = (char)*p;
        size_t k = strlen(esc);
        if (o + k >= cap)
            break;
        memcpy(out + o, esc, k);
        o += k;
    }
    if (cap > 0)
        out[o] = '\0';
    return o;
}
