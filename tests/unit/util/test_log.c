/* test_log.c — a log line is one line: what a message carries cannot forge another or a terminal escape. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

Test(log, control_characters_are_written_as_escapes)
{
    char out[128];
    size_t n = log_escape("job \"a\nWARN  forged\" \x1b[2J\ttab\r\x7f", out, sizeof out);
    cr_expect_str_eq(out, "job \"a\\nWARN  forged\" \\x1b[2J\\ttab\\r\\x7f");
    cr_expect_eq(n, strlen(out));
}

Test(log, text_outside_ascii_is_kept_and_a_short_buffer_cuts_at_a_whole_escape)
{
    char out[16];
    log_escape("caf\xc3\xa9", out, sizeof out);
    cr_expect_str_eq(out, "caf\xc3\xa9");
    char tiny[6];
    log_escape("ab\ncd", tiny, sizeof tiny);
    cr_expect_str_eq(tiny, "ab\\nc");
    char three[3];
    log_escape("a\nb", three, sizeof three);
    cr_expect_str_eq(three, "a", "the escape does not fit whole, so it is left out");
}

Test(log, a_message_with_a_newline_is_one_line_on_stderr)
{
    char path[] = "/tmp/traind-log-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    int saved = dup(STDERR_FILENO);
    cr_assert_geq(dup2(fd, STDERR_FILENO), 0);
    log_msg(LOG_ERROR, "job %s failed", "x\nINFO  all is well");
    fflush(stderr);
    cr_assert_geq(dup2(saved, STDERR_FILENO), 0);
    close(saved);
    char buf[512] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    unlink(path);
    cr_assert_gt(n, 0);
    cr_expect_eq(strchr(buf, '\n'), buf + n - 1, "one newline, at the end: %s", buf);
    cr_expect_not_null(strstr(buf, "job x\\nINFO  all is well failed"), "%s", buf);
}
