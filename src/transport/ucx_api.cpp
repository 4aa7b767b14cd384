#include "transport/ucx_api.hpp"

#include <dlfcn.h>
#include <ucs/debug/log_def.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/log.hpp"
#include "core/strcat.hpp"

namespace vigil::ucx {

namespace {

struct Loaded {
  Api api{};
  bool ok = false;
  std::string why;
};

// Resolves `name` into `slot`; false (with `why`) when the library lacks it.
template <class Fn>
bool resolve(void* lib, const char* name, Fn& slot, std::string& why) {
  slot = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (slot == nullptr) why = cat("libucp.so.0 has no symbol ", name, " (UCX older than 1.10?)");
  return slot != nullptr;
}

// UCX's log lines (by default on the application's stdout, where they mix
// with its output) go to vigil's log instead: stderr or VIGIL_LOG_FILE,
// "vigil[pid N] WARN UCX: <file:line> <message>". UCX filters by its own
// level first (UCX_LOG_LEVEL, default warn).
ucs_log_func_rc_t toVigilLog(const char* file, unsigned line, const char*, ucs_log_level_t level,
                             const ucs_log_component_config_t*, const char* message, va_list ap) {
  const LogLevel ours = level <= UCS_LOG_LEVEL_ERROR  ? LogLevel::Error
                        : level <= UCS_LOG_LEVEL_WARN ? LogLevel::Warn
                        : level <= UCS_LOG_LEVEL_INFO ? LogLevel::Info
                                                      : LogLevel::Debug;
  if (Logger::instance().enabled(ours)) {
    char text[1024];
    va_list copy;
    va_copy(copy, ap);
    std::vsnprintf(text, sizeof text, message, copy);
    va_end(copy);
    const char* base = std::strrchr(file, '/');
    Logger::instance().write(ours, -1, cat("UCX: ", base != nullptr ? base + 1 : file, ":", line, " ", text));
  }
  return UCS_LOG_FUNC_RC_STOP;
}

Loaded loadOnce() {
  Loaded l;
  // Never unloaded: UCX keeps threads and handlers for the process's life.
  void* lib = ::dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = ::dlerror();
    l.why = cat("cannot load libucp.so.0 (", err != nullptr ? err : "unknown error", ")");
    return l;
  }
  Api& a = l.api;
  l.ok =
      resolve(lib, "ucp_config_read", a.configRead, l.why) &&
      resolve(lib, "ucp_config_release", a.configRelease, l.why) &&
      resolve(lib, "ucp_config_modify", a.configModify, l.why) &&
      resolve(lib, "ucp_init_version", a.initVersion, l.why) && resolve(lib, "ucp_cleanup", a.cleanup, l.why) &&
      resolve(lib, "ucp_worker_create", a.workerCreate, l.why) &&
      resolve(lib, "ucp_worker_destroy", a.workerDestroy, l.why) &&
      resolve(lib, "ucp_worker_get_address", a.workerGetAddress, l.why) &&
      resolve(lib, "ucp_worker_release_address", a.workerReleaseAddress, l.why) &&
      resolve(lib, "ucp_worker_get_efd", a.workerGetEfd, l.why) && resolve(lib, "ucp_worker_arm", a.workerArm, l.why) &&
      resolve(lib, "ucp_worker_progress", a.workerProgress, l.why) &&
      resolve(lib, "ucp_worker_flush_nbx", a.workerFlushNbx, l.why) &&
      resolve(lib, "ucp_ep_create", a.epCreate, l.why) && resolve(lib, "ucp_ep_close_nbx", a.epCloseNbx, l.why) &&
      resolve(lib, "ucp_tag_send_nbx", a.tagSendNbx, l.why) && resolve(lib, "ucp_tag_recv_nbx", a.tagRecvNbx, l.why) &&
      resolve(lib, "ucp_tag_probe_nb", a.tagProbeNb, l.why) &&
      resolve(lib, "ucp_tag_msg_recv_nbx", a.tagMsgRecvNbx, l.why) &&
      resolve(lib, "ucp_tag_recv_request_test", a.tagRecvRequestTest, l.why) &&
      resolve(lib, "ucp_request_check_status", a.requestCheckStatus, l.why) &&
      resolve(lib, "ucp_request_cancel", a.requestCancel, l.why) &&
      resolve(lib, "ucp_request_free", a.requestFree, l.why) &&
      resolve(lib, "ucs_status_string", a.statusString, l.why) && resolve(lib, "ucp_mem_map", a.memMap, l.why) &&
      resolve(lib, "ucp_mem_unmap", a.memUnmap, l.why) && resolve(lib, "ucp_rkey_pack", a.rkeyPack, l.why) &&
      resolve(lib, "ucp_rkey_buffer_release", a.rkeyBufferRelease, l.why) &&
      resolve(lib, "ucp_ep_rkey_unpack", a.epRkeyUnpack, l.why) &&
      resolve(lib, "ucp_rkey_destroy", a.rkeyDestroy, l.why) && resolve(lib, "ucp_put_nbx", a.putNbx, l.why) &&
      resolve(lib, "ucp_get_nbx", a.getNbx, l.why) && resolve(lib, "ucp_atomic_op_nbx", a.atomicOpNbx, l.why) &&
      resolve(lib, "ucp_worker_fence", a.workerFence, l.why);
  // libucs, loaded with libucp: optional (the lines stay UCX's if absent).
  using PushHandler = void (*)(ucs_log_func_t);
  if (auto push = reinterpret_cast<PushHandler>(::dlsym(lib, "ucs_log_push_handler")); l.ok && push != nullptr) {
    push(toVigilLog);
  }
  return l;
}

}  // namespace

const Api* load(std::string* why) {
  static const Loaded loaded = loadOnce();  // thread-safe once
  if (!loaded.ok && why != nullptr) *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

}  // namespace vigil::ucx
