/* test_api.c — placeholder */
#include <criterion/criterion.h>
Test(x, y) {}
