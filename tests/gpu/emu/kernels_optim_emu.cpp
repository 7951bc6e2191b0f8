/* kernels_optim_emu.cpp — gpu/kernels_optim.cu built for the host emulation. */
#include "emu_cuda.h"

#include "kernels_optim.cu"
