/* log.h — leveled, timestamped log lines on stderr, safe to call from any thread. */
#ifndef TRAIND_UTIL_LOG_H
#define TRAIND_UTIL_LOG_H

#include <stddef.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Set once at start-up, before any thread is created. */
void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);

/* "error", "warn", "info", "debug" -> *out; 0 on success, -1 for anything else. */
int log_level_parse(const char *name, enum log_level *out);

/* One line: "2026-11-22T02:18:00.123Z INFO  message". Callers never pass secrets. */
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * in with control characters written as \n, \r, \t or \xHH, into out (cap bytes, always
 * NUL-terminated, cut short at a whole character); returns the length. log_msg applies it to
 * every message, so one call is one line.
 */
size_t log_escape(const char *in, char *out, size_t cap);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
