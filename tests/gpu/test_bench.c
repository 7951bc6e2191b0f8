/* test_bench.c — the add benchmark prints its table (timings are printed, never asserted). */
#include "bench_add.h"
#include "gpu_test.h"

Test(bench, add_table_has_a_header_and_one_row_per_size)
{
    gpu_or_skip();
    struct err e = {0};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(gpu_bench_add_sizes(f, 0, 10, 2, &e), 0, "%s", e.msg);
    fclose(f);
    cr_expect(strncmp(buf, "# cuda:0: ", 10) == 0, "names the GPU first: %s", buf);
    cr_expect(strstr(buf, "size") && strstr(buf, "cpu_s") && strstr(buf, "gpu_with_copy_s") &&
              strstr(buf, "ratio"), "%s", buf);
    int rows = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        long long n;
        double cpu, gpu, copy, ratio;
        if (sscanf(line, "%lld %lf %lf %lf %lf", &n, &cpu, &gpu, &copy, &ratio) == 5) {
            cr_expect_eq(n, 1LL << rows, "row %d is size %lld", rows, n);
            cr_expect(cpu > 0 && gpu > 0 && copy > 0 && ratio > 0, "row %d: %s", rows, line);
            rows++;
        }
    }
    cr_expect_eq(rows, 11);
    free(buf);
}

Test(bench, add_on_a_gpu_that_is_not_there_is_a_device_error)
{
    gpu_or_skip();
    struct err e = {0};
    FILE *f = fopen("/dev/null", "w");
    cr_assert_not_null(f);
    cr_expect_eq(gpu_bench_add_sizes(f, 63, 4, 1, &e), ERR_DEVICE, "%s", e.msg);
    cr_expect(strstr(e.msg, "cuda:63"), "%s", e.msg);
    fclose(f);
}
