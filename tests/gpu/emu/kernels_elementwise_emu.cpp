/* kernels_elementwise_emu.cpp — gpu/kernels_elementwise.cu built for the host emulation. */
#include "emu_cuda.h"

#include "kernels_elementwise.cu"
