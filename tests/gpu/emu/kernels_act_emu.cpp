/* kernels_act_emu.cpp — gpu/kernels_act.cu built for the host emulation. */
#include "emu_cuda.h"

#include "kernels_act.cu"
