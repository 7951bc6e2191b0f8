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

/* The text of the file at path, NUL-terminated and malloc'ed, or NULL when it cannot be read. */
static inline char *tmp_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *text = NULL;
    size_t cap = 0;
    if (getdelim(&text, &cap, '\0', f) <= 0) {
        free(text);
        text = NULL;
    }
    fclose(f);
    return text;
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

/* A suite whose tests each get a fresh temporary directory `dir`, removed after the test: TMP_SUITE(name). */
#define TMP_SUITE(name)                                          \
    static char *dir;                                            \
    static void tmp_suite_setup(void) { dir = tmp_make(); }      \
    static void tmp_suite_teardown(void)                         \
    {                                                            \
        tmp_remove(dir);                                         \
        dir = NULL;                                              \
    }                                                            \
    TestSuite(name, .init = tmp_suite_setup, .fini = tmp_suite_teardown)

/* Partitions part-00000.csv ... of the given sizes (0: an empty file) in d, 2 columns: global row g
 * (in name order) holds (g, -g). Returns the rows in all. */
static inline int tmp_write_partitions(const char *d, const int *sizes, int n)
{
    int g = 0;
    for (int p = 0; p < n; p++) {
        char name[32], *text = malloc(32 * (size_t)sizes[p] + 1);
        size_t len = 0;
        cr_assert_not_null(text);
        for (int r = 0; r < sizes[p]; r++, g++)
            len += (size_t)sprintf(text + len, "%d,%d\n", g, -g);
        snprintf(name, sizeof name, "part-%05d.csv", p);
        tmp_write_n(d, name, text, len);
        free(text);
    }
    return g;
}

#endif
