/* kernels_linear_emu.cpp — gpu/kernels_linear.cu built for the host emulation. */
#include "emu_cuda.h"

#include "kernels_linear.cu"
