/* nccl_fn.h — comm-internal: the NCCL entry points comm_nccl.c calls, as a table loaded on demand. */
#ifndef TRAIND_COMM_NCCL_FN_H
#define TRAIND_COMM_NCCL_FN_H

#include <nccl.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * NCCL is not linked: its library is some 200 MB that a daemon without GPU replicas never
 * needs, and a host without it must still start traind. The first device world fills this
 * table (comm/nccl_load.c dlopens libnccl.so.2; the host emulation suite links
 * tests/gpu/emu/nccl_load_emu.c and its emulated NCCL instead). Every NCCL call goes
 * through here; add an entry for a new one.
 */
struct comm_nccl_fn {
    ncclResult_t (*get_unique_id)(ncclUniqueId *id);
    ncclResult_t (*comm_init_rank_config)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                          ncclConfig_t *config);
    ncclResult_t (*comm_get_async_error)(ncclComm_t comm, ncclResult_t *async_error);
    ncclResult_t (*all_reduce)(const void *sendbuff, void *recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
    ncclResult_t (*comm_finalize)(ncclComm_t comm);
    ncclResult_t (*comm_destroy)(ncclComm_t comm);
    ncclResult_t (*comm_abort)(ncclComm_t comm);
    const char *(*get_error_string)(ncclResult_t result);
};

/* Fills t, loading NCCL on first use; ERR_DEVICE naming the library when it is missing. */
int comm_nccl_load(struct comm_nccl_fn *t, struct err *e);

#ifdef __cplusplus
}
#endif

#endif
