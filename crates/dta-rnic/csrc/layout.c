/* Sizes and offsets of the rdma-core structures dta-rnic passes to libibverbs / librdmacm,
 * taken from the installed headers, so tests can check the Rust definitions (rdma-sys; some of
 * its structs are written by hand rather than generated) against them. */
#include <stddef.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

const size_t dta_rnic_layout[] = {
    sizeof(struct ibv_sge),
    sizeof(struct ibv_send_wr),
    offsetof(struct ibv_send_wr, sg_list),
    offsetof(struct ibv_send_wr, num_sge),
    offsetof(struct ibv_send_wr, opcode),
    offsetof(struct ibv_send_wr, send_flags),
    sizeof(struct ibv_wc),
    offsetof(struct ibv_wc, status),
    sizeof(struct ibv_qp_init_attr),
    offsetof(struct ibv_qp_init_attr, cap),
    offsetof(struct ibv_qp_init_attr, qp_type),
    sizeof(struct rdma_conn_param),
    offsetof(struct rdma_conn_param, responder_resources),
    offsetof(struct rdma_conn_param, initiator_depth),
    offsetof(struct rdma_conn_param, rnr_retry_count),
    sizeof(struct rdma_cm_event),
    offsetof(struct rdma_cm_event, event),
    offsetof(struct rdma_cm_event, status),
    offsetof(struct rdma_cm_event, param),
    offsetof(struct rdma_cm_id, verbs),
    offsetof(struct rdma_cm_id, qp),
    offsetof(struct rdma_cm_id, route),
    offsetof(struct ibv_mr, lkey),
    offsetof(struct ibv_mr, rkey),
    offsetof(struct ibv_device_attr, max_qp_rd_atom),
    offsetof(struct ibv_device_attr, max_qp_init_rd_atom),
    IBV_ACCESS_LOCAL_WRITE,
    IBV_ACCESS_REMOTE_WRITE,
    IBV_ACCESS_REMOTE_READ,
    IBV_ACCESS_REMOTE_ATOMIC,
    RDMA_PS_TCP,
    IBV_WR_SEND,
    IBV_SEND_SIGNALED,
};
const size_t dta_rnic_layout_len = sizeof(dta_rnic_layout) / sizeof(dta_rnic_layout[0]);
