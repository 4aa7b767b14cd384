#include "algo/algo.hpp"
#include "core/errors.hpp"

namespace vigil::algo {

namespace {

[[noreturn]] void missingCapability(const char* what) {
  ErrorBuilder(Errc::Internal)
      .cause("an algorithm that needs ", what, " was selected for a step runner that has none")
      .raise();
}

}  // namespace

ShmStepRunner& requireShm(StepRunner& r) {
  auto* shm = dynamic_cast<ShmStepRunner*>(&r);
  if (shm == nullptr || shm->shmPlane() == nullptr) missingCapability("shared memory");
  return *shm;
}

HierarchicalRunner& requireHierarchy(StepRunner& r) {
  auto* hierarchy = dynamic_cast<HierarchicalRunner*>(&r);
  if (hierarchy == nullptr) missingCapability("per-host and host-leader communicators");
  return *hierarchy;
}

}  // namespace vigil::algo
