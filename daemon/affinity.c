/* affinity.c — parsing the kernel's cpulist format and naming a PCI device's local_cpulist file. */
#include "affinity.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool affinity_parse_cpulist(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    int n = 0;
    while (*s && *s != '\n') {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s || lo < 0 || !isdigit((unsigned char)*s))
            return false;
        s = end;
        if (*s == '-') {
            hi = strtol(s + 1, &end, 10);
            if (end == s + 1 || hi < lo || !isdigit((unsigned char)s[1]))
                return false;
            s = end;
        }
        for (long c = lo; c <= hi && c < CPU_SETSIZE; c++, n++)
            CPU_SET((int)c, set);
        if (*s == ',')
            s++;
        else if (*s && *s != '\n')
            return false;
    }
    return n > 0;
}

bool affinity_cpulist_path(const char *id, char *path, size_t cap)
{
    if (strlen(id) == 16 && strncmp(id, "0000", 4) == 0)
        id += 4;
    if (!*id)
        return false;
    int k = snprintf(path, cap, "/sys/bus/pci/devices/");
    if (k < 0 || (size_t)k + strlen(id) + sizeof "/local_cpulist" > cap)
        return false;
    for (const char *c = id; *c; c++)
        path[k++] = (char)tolower((unsigned char)*c);
    snprintf(path + k, cap - (size_t)k, "/local_cpulist");
    return true;
}
