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

LoadStoreRunner& requireLoadStore(StepRunner& r) {
  auto* loadStore = dynamic_cast<LoadStoreRunner*>(&r);
  if (loadStore == nullptr || !loadStore->hasLoadStore()) missingCapability("load/store access to the peers' memory");
  return *loadStore;
}

HierarchicalRunner& requireHierarchy(StepRunner& r) {
  auto* hierarchy = dynamic_cast<HierarchicalRunner*>(&r);
  if (hierarchy == nullptr) missingCapability("per-host and host-leader communicators");
  return *hierarchy;
}

}  // namespace vigil::algo
