/* test_affinity.c — the kernel's cpulist format and the sysfs path of a GPU's local CPUs. */
#include <criterion/criterion.h>

#include "affinity.h"

Test(affinity, ranges_and_singles_are_read)
{
    cpu_set_t set;
    cr_assert(affinity_parse_cpulist("0-3,8,10-11\n", &set));
    cr_expect_eq(CPU_COUNT(&set), 7);
    cr_expect(CPU_ISSET(0, &set) && CPU_ISSET(3, &set) && CPU_ISSET(8, &set) && CPU_ISSET(11, &set));
    cr_expect_not(CPU_ISSET(4, &set));
    cr_expect_not(CPU_ISSET(9, &set));
}

Test(affinity, malformed_or_empty_lists_are_refused)
{
    cpu_set_t set;
    cr_expect_not(affinity_parse_cpulist("", &set));
    cr_expect_not(affinity_parse_cpulist("\n", &set));
    cr_expect_not(affinity_parse_cpulist("3-1", &set));
    cr_expect_not(affinity_parse_cpulist("a-b", &set));
    cr_expect_not(affinity_parse_cpulist("0;1", &set));
    cr_expect_not(affinity_parse_cpulist("-1", &set));
}

Test(affinity, the_sysfs_path_is_lower_case_with_a_4_digit_domain)
{
    char path[128];
    cr_assert(affinity_cpulist_path("0000:3B:00.0", path, sizeof path));
    cr_expect_str_eq(path, "/sys/bus/pci/devices/0000:3b:00.0/local_cpulist");
    cr_assert(affinity_cpulist_path("00000000:3B:00.0", path, sizeof path));
    cr_expect_str_eq(path, "/sys/bus/pci/devices/0000:3b:00.0/local_cpulist");
    cr_expect_not(affinity_cpulist_path("", path, sizeof path));
    cr_expect_not(affinity_cpulist_path("0000:3B:00.0", path, 20));
}
