/* test_err.c — util/err: err_relative_to, which keeps server paths out of what clients read. */
#include <criterion/criterion.h>

#include "err.h"

Test(err, every_path_under_the_dir_loses_the_dir)
{
    struct err e = {0};
    err_set(&e, ERR_INVALID_DATA, "/srv/state/checkpoints/a/iter-1.safetensors: bad; /srv/state/x too");
    err_relative_to(&e, "/srv/state");
    cr_expect_str_eq(e.msg, "checkpoints/a/iter-1.safetensors: bad; x too");
}

Test(err, a_trailing_slash_on_the_dir_changes_nothing)
{
    struct err e = {0};
    err_set(&e, ERR_IO, "/data/dev/part-00000.csv: line 2");
    err_relative_to(&e, "/data/");
    cr_expect_str_eq(e.msg, "dev/part-00000.csv: line 2");
}

Test(err, a_longer_name_that_only_starts_with_the_dir_is_kept)
{
    struct err e = {0};
    err_set(&e, ERR_IO, "/data2/x.csv and /data");
    err_relative_to(&e, "/data");
    cr_expect_str_eq(e.msg, "/data2/x.csv and /data");
}

Test(err, the_root_and_no_dir_leave_the_message_alone)
{
    struct err e = {0};
    err_set(&e, ERR_IO, "/a/b");
    err_relative_to(&e, "/");
    err_relative_to(&e, NULL);
    err_relative_to(&e, "");
    cr_expect_str_eq(e.msg, "/a/b");
}
