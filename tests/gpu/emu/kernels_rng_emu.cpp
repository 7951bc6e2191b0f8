/* kernels_rng_emu.cpp — gpu/kernels_rng.cu built for the host emulation. */
#include "emu_cuda.h"

#include "kernels_rng.cu"
