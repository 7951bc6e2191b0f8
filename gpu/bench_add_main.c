/* bench_add_main.c — `bench_gpu_add`: prints the add benchmark's table until `traind bench add` exists. */
#include <stdio.h>

#include "bench_add.h"

int main(void)
{
    struct err e = {0};
    if (gpu_bench_add(stdout, &e)) {
        fprintf(stderr, "bench_gpu_add: %s\n", e.msg);
        return 1;
    }
    return 0;
}
