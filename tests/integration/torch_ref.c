/* torch_ref.c — reading PyTorch's reference losses and comparing a job's metrics with them. */
#include "torch_ref.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void torch_ref_read(const char *env, const char *name, double *loss, int n)
{
    const char *path = getenv(env);
    cr_assert_not_null(path, "%s is not set (meson sets it)", env);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    char got[64];
    int count = 0;
    while (fscanf(f, "%63s %d", got, &count) == 2) {
        for (int i = 0; i < count; i++) {
            double v;
            cr_assert_eq(fscanf(f, "%lf", &v), 1);
            if (strcmp(got, name) == 0 && i < n)
                loss[i] = v;
        }
        if (strcmp(got, name) == 0) {
            cr_assert_eq(count, n);
            fclose(f);
            return;
        }
    }
    fclose(f);
    cr_assert_fail("no record %s in %s", name, path);
}

void expect_torch_losses(json_t *rows, const char *name)
{
    double torch_loss[50];
    torch_ref_read("TRAIND_BASELINE_TORCH", name, torch_loss, 50);
    cr_assert_geq(json_array_size(rows), 50);
    for (int i = 0; i < 50; i++) {
        double got = json_number_value(json_array_get(json_array_get(rows, (size_t)i), 2));
        cr_expect(fabs(got - torch_loss[i]) <= 1e-9 * fabs(torch_loss[i]),
                  "%s at iteration %d: %.17g, PyTorch %.17g", name, i, got, torch_loss[i]);
    }
}
