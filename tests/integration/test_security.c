/* test_security.c — placeholder */
#include <criterion/criterion.h>
Test(x, y) {}
