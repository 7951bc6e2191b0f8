/* be_cpu.h — the CPU backend's kernels, for a backend that falls back to them on host memory. */
#ifndef TRAIND_CORE_BE_CPU_H
#define TRAIND_CORE_BE_CPU_H

#include "backend.h"

/* The CPU kernels, for a backend that wants to fall back to them on host memory. */
const struct be_kernels *be_cpu_kernels(void);

#endif
