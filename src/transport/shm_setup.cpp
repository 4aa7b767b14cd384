// Creating and mapping a communicator's shared segment.
//
// Rank 0 creates it under a name no other job uses (the job token and its
// pid), reserves its pages (so a full /dev/shm is an error here, not a
// SIGBUS later), and tells the others; each maps it and says so; rank 0
// then unlinks the name and gives everyone the verdict. From then on the
// segment exists only as long as some rank maps it: a kill -9 leaves nothing.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/errors.hpp"
#include "core/strcat.hpp"
#include "net/socket.hpp"
#include "transport/shm_transport.hpp"

namespace vigil {

namespace {

enum Verdict : uint8_t { kCreated = 'C', kMapped = 'M', kOk = 'O', kFailed = 'F' };

size_t floorPow2(size_t v) {
  size_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

shm::Geometry chooseGeometry(int nranks) {
  shm::Geometry g;
  g.n = nranks;
  // About 16 MiB of rings and 16 MiB of staging in all, so that 64 ranks
  // on one host fit in a container's default 64 MiB /dev/shm: rings of 4 KiB
  // to 1 MiB per direction, staging buffers of 64 KiB to kStagingBytes.
  const size_t pairs = static_cast<size_t>(nranks) * static_cast<size_t>(nranks - 1);
  g.ringBytes = std::clamp<size_t>(floorPow2((16u << 20) / pairs), 4u << 10, 1u << 20);
  g.stagingBytes =
      std::clamp<size_t>(floorPow2((8u << 20) / static_cast<size_t>(nranks)), 64u << 10, shm::kStagingBytes);
  return g;
}

struct Failure {
  std::string what;
};

void* mapShared(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw Failure{cat("mmap of ", bytes, " bytes failed: ", std::strerror(errno))};
  return p;
}

class Unlinker {
 public:
  explicit Unlinker(std::string name) : name_(std::move(name)) {}
  ~Unlinker() { unlinkNow(); }
  void unlinkNow() {
    if (!name_.empty()) ::shm_unlink(name_.c_str());
    name_.clear();
  }

 private:
  std::string name_;
};

}  // namespace

std::unique_ptr<ShmTransport> establishShm(int rank, int nranks, const std::string& uniqueName,
                                           std::span<const Fd> dataFds, Deadline deadline) {
  auto fail = [&](const std::string& cause) {
    ErrorBuilder(Errc::NetShmUnavailable).rank(rank, nranks).op("init").cause(cause).raise();
  };
  auto lost = [&](int peer) {
    ErrorBuilder(Errc::BootMeshFailed)
        .rank(rank, nranks)
        .op("init")
        .cause("rank ", peer, " did not answer while the shared-memory segment was set up (it failed or exited)")
        .raise();
  };
  auto sendByte = [&](int peer, uint8_t b) {
    if (sendAll(dataFds[static_cast<size_t>(peer)].get(), &b, 1, deadline) != IoStatus::Done) lost(peer);
  };
  auto recvByte = [&](int peer) {
    uint8_t b = 0;
    if (recvAll(dataFds[static_cast<size_t>(peer)].get(), &b, 1, deadline) != IoStatus::Done) lost(peer);
    return b;
  };
  const std::string name = cat("/vigil-", uniqueName);

  if (rank == 0) {
    const shm::Geometry g = chooseGeometry(nranks);
    Unlinker unlinker(name);
    ShmMapping mapping;
    std::string problem;
    try {
      Fd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
      if (!fd) throw Failure{cat("shm_open(", name, ") failed: ", std::strerror(errno))};
      if (::ftruncate(fd.get(), static_cast<off_t>(g.totalBytes())) != 0) {
        throw Failure{cat("ftruncate to ", g.totalBytes(), " bytes failed: ", std::strerror(errno))};
      }
      if (int e = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(g.totalBytes())); e != 0) {
        throw Failure{cat("reserving ", g.totalBytes(), " bytes in /dev/shm failed: ", std::strerror(e))};
      }
      mapping = ShmMapping(mapShared(fd.get(), g.totalBytes()), g.totalBytes());
      auto* h = reinterpret_cast<shm::SegmentHeader*>(mapping.base());
      *h = shm::SegmentHeader{shm::kSegmentMagic, static_cast<uint32_t>(nranks), 0, g.ringBytes, g.stagingBytes};
    } catch (const Failure& f) {
      problem = f.what;
    }
    for (int p = 1; p < nranks; ++p) sendByte(p, problem.empty() ? kCreated : kFailed);
    if (!problem.empty()) fail(problem);
    std::vector<int> refused;
    for (int p = 1; p < nranks; ++p) {
      if (recvByte(p) != kMapped) refused.push_back(p);
    }
    unlinker.unlinkNow();  // every rank has it mapped, or gave up
    for (int p = 1; p < nranks; ++p) sendByte(p, refused.empty() ? kOk : kFailed);
    if (!refused.empty()) {
      fail(cat("rank(s) ", joinRanks(refused), " could not map the segment ", name, " (see their errors)"));
    }
    return std::make_unique<ShmTransport>(rank, g, std::move(mapping));
  }

  if (recvByte(0) != kCreated) fail("rank 0 could not create the shared-memory segment (see its error)");
  shm::Geometry g;
  ShmMapping mapping;
  std::string problem;
  try {
    Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
    if (!fd) throw Failure{cat("shm_open(", name, ") failed: ", std::strerror(errno))};
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || st.st_size < static_cast<off_t>(sizeof(shm::SegmentHeader))) {
      throw Failure{cat("the segment ", name, " is too small")};
    }
    mapping = ShmMapping(mapShared(fd.get(), static_cast<size_t>(st.st_size)), static_cast<size_t>(st.st_size));
    const auto* h = reinterpret_cast<const shm::SegmentHeader*>(mapping.base());
    g.n = nranks;
    g.ringBytes = h->ringBytes;
    g.stagingBytes = h->stagingBytes;
    if (h->magic != shm::kSegmentMagic || h->nranks != static_cast<uint32_t>(nranks) ||
        g.totalBytes() != mapping.bytes()) {
      throw Failure{cat("the segment ", name, " does not have the expected layout")};
    }
  } catch (const Failure& f) {
    problem = f.what;
  }
  sendByte(0, problem.empty() ? kMapped : kFailed);
  if (!problem.empty()) fail(problem);
  if (recvByte(0) != kOk) fail("another rank could not map the shared-memory segment (see its error)");
  return std::make_unique<ShmTransport>(rank, g, std::move(mapping));
}

}  // namespace vigil
