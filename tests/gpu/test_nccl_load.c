/*
 * test_nccl_load.c — comm/'s NCCL is opened on demand (comm/nccl_load.c): the toolkit's
 * libnccl.so.2 loads and has every entry point comm_nccl.c calls. Needs the library, not a GPU.
 */
#include <criterion/criterion.h>

#include "comm.h"

Test(nccl_load, the_toolkits_nccl_loads_with_every_entry_comm_calls)
{
    struct err e = {0};
    cr_assert(comm_dev_available(&e), "%s", e.msg);
    cr_assert(comm_dev_available(&e), "a second time: %s", e.msg);   /* found out once, kept */
}
