/* affinity.h — the CPUs local to a PCI device (affinity_*), from sysfs, for pinning a GPU worker near its GPU. */
#ifndef TRAIND_DAEMON_AFFINITY_H
#define TRAIND_DAEMON_AFFINITY_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

/* A kernel cpulist ("0-3,8-11\n") into set; false when malformed or naming no CPU. */
bool affinity_parse_cpulist(const char *list, cpu_set_t *set);

/*
 * The sysfs file listing the CPUs local to the PCI device bus_id as CUDA writes it
 * ("0000:3B:00.0", or with an 8-digit domain "00000000:3B:00.0"): sysfs names it in
 * lower case with a 4-digit domain. False when bus_id is empty or too long for cap.
 */
bool affinity_cpulist_path(const char *bus_id, char *path, size_t cap);

#endif
