/* scratch_dir.h — a fresh directory for each test (a state directory), removed after it. */
#ifndef TRAIND_TESTS_SCRATCH_DIR_H
#define TRAIND_TESTS_SCRATCH_DIR_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

static char dir[64];

static void scratch_dir_make(void)
{
    snprintf(dir, sizeof dir, "/tmp/traind-test-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void scratch_dir_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

#endif
