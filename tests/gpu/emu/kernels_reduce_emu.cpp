/* kernels_reduce_emu.cpp — gpu/kernels_reduce.cu built for the host emulation. */
#include "emu_cuda.h"

#include "kernels_reduce.cu"
