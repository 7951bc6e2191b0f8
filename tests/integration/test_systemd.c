/* test_systemd.c — placeholder */
#include <criterion/criterion.h>
Test(x, y) {}
