#pragma once
// The part of UCX's API that the ucx transport calls, resolved from
// libucp.so.0 the first time a communicator asks for the ucx transport.
// libvigil does not link UCX: loading it installs UCX's own fault-signal
// handlers and threads, which a process that never uses UCX must not get.

#include <ucp/api/ucp.h>

#include <string>

namespace vigil::ucx {

struct Api {
  decltype(&ucp_config_read) configRead;
  decltype(&ucp_config_release) configRelease;
  decltype(&ucp_config_modify) configModify;
  decltype(&ucp_init_version) initVersion;
  decltype(&ucp_cleanup) cleanup;
  decltype(&ucp_worker_create) workerCreate;
  decltype(&ucp_worker_destroy) workerDestroy;
  decltype(&ucp_worker_get_address) workerGetAddress;
  decltype(&ucp_worker_release_address) workerReleaseAddress;
  decltype(&ucp_worker_get_efd) workerGetEfd;
  decltype(&ucp_worker_arm) workerArm;
  decltype(&ucp_worker_progress) workerProgress;
  decltype(&ucp_worker_flush_nbx) workerFlushNbx;
  decltype(&ucp_ep_create) epCreate;
  decltype(&ucp_ep_close_nbx) epCloseNbx;
  decltype(&ucp_tag_send_nbx) tagSendNbx;
  decltype(&ucp_tag_recv_nbx) tagRecvNbx;
  decltype(&ucp_tag_probe_nb) tagProbeNb;
  decltype(&ucp_tag_msg_recv_nbx) tagMsgRecvNbx;
  decltype(&ucp_tag_recv_request_test) tagRecvRequestTest;
  decltype(&ucp_request_check_status) requestCheckStatus;
  decltype(&ucp_request_cancel) requestCancel;
  decltype(&ucp_request_free) requestFree;
  decltype(&ucs_status_string) statusString;
  // One-sided access
  decltype(&ucp_mem_map) memMap;
  decltype(&ucp_mem_unmap) memUnmap;
  decltype(&ucp_rkey_pack) rkeyPack;
  decltype(&ucp_rkey_buffer_release) rkeyBufferRelease;
  decltype(&ucp_ep_rkey_unpack) epRkeyUnpack;
  decltype(&ucp_rkey_destroy) rkeyDestroy;
  decltype(&ucp_put_nbx) putNbx;
  decltype(&ucp_get_nbx) getNbx;
  decltype(&ucp_atomic_op_nbx) atomicOpNbx;
  decltype(&ucp_worker_fence) workerFence;
};

// The loaded API, or null with `why` saying what failed (dlopen's words).
const Api* load(std::string* why);

}  // namespace vigil::ucx
