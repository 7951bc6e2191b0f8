/* kernels_rows_emu.cpp — gpu/kernels_rows.cu built for the host emulation. */
#include "emu_cuda.h"

#include "kernels_rows.cu"
