/* torch_ref.h — the integration tests' PyTorch reference: losses written by make_baseline_fixture.py. */
#ifndef TRAIND_TESTS_TORCH_REF_H
#define TRAIND_TESTS_TORCH_REF_H

#include <jansson.h>

/* The loss column (index 2) of the first 50 metric rows against PyTorch's record `name`,
 * to 1e-9 relative; $TRAIND_BASELINE_TORCH names the file (meson sets it). */
void expect_torch_losses(json_t *rows, const char *name);

/* The n values of record `name` in the fixture file that environment variable env names
 * ("name n v0 v1 ..." lines); fails the test unless the record has exactly n. */
void torch_ref_read(const char *env, const char *name, double *v, int n);

#endif
