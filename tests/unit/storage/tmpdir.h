/* tmpdir.h — test helpers: a private mkdtemp directory, writing files into it, removing it afterwards. */
#ifndef TRAIND_TESTS_STORAGE_TMPDIR_H
#define TRAIND_TESTS_STORAGE_TMPDIR_H

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline char *tmp_make(void)
{
    char tmpl[] = "/tmp/traind-storage-XXXXXX";
    char *d = mkdtemp(tmpl);
    cr_assert_not_null(d, "mkdtemp failed");
    return strdup(d);
}

/* dir/name, malloc'ed. */
static inline char *tmp_path(const char *dir, const char *name)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

static inline void tmp_mkdir(const char *dir, const char *name)
{
    char *p = tmp_path(dir, name);
    cr_assert_eq(mkdir(p, 0700), 0, "mkdir %s", p);
    free(p);
}

static inline void tmp_write_n(const char *dir, const char *name, const char *text, size_t n)
{
    char *p = tmp_path(dir, name);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f, "fopen %s", p);
    cr_assert_eq(fwrite(text, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
    free(p);
}

static inline void tmp_write(const char *dir, const char *name, const char *text)
{
    tmp_write_n(dir, name, text, strlen(text));
}

static inline int tmp_rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static inline void tmp_remove(char *dir)
{
    if (dir)
        nftw(dir, tmp_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

#endif
