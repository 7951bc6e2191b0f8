/* auth.c — the bearer token: read once from a private file, compared in constant time. */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

int api_token_load(const char *path, char **out, struct err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return err_set(e, ERR_IO, "--token-file %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(e, ERR_IO, "--token-file %s is not a regular file", path);
    }
    if (st.st_mode & (S_IROTH | S_IWOTH)) {
        close(fd);
        return err_set(e, ERR_AUTH, "--token-file %s is accessible to every user (mode %03o); "
                       "run: chmod 600 %s", path, (unsigned)(st.st_mode & 0777), path);
    }
    char buf[API_TOKEN_MAX + 2];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int saved = errno;
    close(fd);
    if (n < 0)
        return err_set(e, ERR_IO, "--token-file %s: %s", path, strerror(saved));
    buf[n] = '\0';
    size_t len = strcspn(buf, "\r\n");
    if (buf[len] == '\0' && (size_t)n > API_TOKEN_MAX)
        return err_set(e, ERR_INVALID_ARG, "--token-file %s: the token is longer than %d bytes", path,
                       API_TOKEN_MAX);
    while (len && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
        len--;
    if (len == 0)
        return err_set(e, ERR_INVALID_ARG, "--token-file %s holds no token on its first line", path);
    if (!(*out = strndup(buf, len)))
        return err_set(e, ERR_NOMEM, "out of memory");
    return 0;
}

bool api_token_ok(const char *token, const char *authorization)
{
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return false;
    const char *given = authorization + 7;
    while (*given == ' ')
        given++;
    size_t want = strlen(token), got = strnlen(given, API_TOKEN_MAX + 1);
    /* Every byte of the token is looked at whatever matches, so timing tells nothing. */
    unsigned char diff = (unsigned char)(want != got);
    for (size_t i = 0; i < want; i++)
        diff |= (unsigned char)(token[i] ^ (i < got ? given[i] : 0));
    return diff == 0;
}
