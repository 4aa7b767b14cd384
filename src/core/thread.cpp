#include "core/thread.hpp"

#include <signal.h>

namespace vigil {

AsyncSignalsBlocked::AsyncSignalsBlocked() {
  sigset_t block;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH})
    sigaddset(&block, sig);
  ::pthread_sigmask(SIG_BLOCK, &block, &old_);
}

AsyncSignalsBlocked::~AsyncSignalsBlocked() {
  ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace vigil
