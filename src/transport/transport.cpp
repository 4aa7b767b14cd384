// The transport table and what every transport shares: the pieces of a
// payload, and the judgement of an incoming frame header.

#include "transport/transport.hpp"

#include <algorithm>

#include "core/strcat.hpp"
#include "net/socket.hpp"
#include "transport/shm_transport.hpp"
#include "transport/tcp_transport.hpp"
#if VIGIL_HAVE_UCX
#include "transport/ucx_transport.hpp"
#endif

namespace vigil {

size_t payloadPieces(ActiveTransfer& a, size_t offset, iovec* out, size_t max) {
  const Transfer& t = *a.transfer;
  const size_t bytes = t.payloadBytes();
  if (offset >= bytes || max == 0) return 0;
  if (t.segments.empty()) {
    auto* base = static_cast<uint8_t*>(t.isSend ? const_cast<void*>(t.sendData) : t.payloadDest());
    out[0] = {base + offset, bytes - offset};
    return 1;
  }
  while (offset >= a.segmentStart + t.segments[a.segment].bytes) a.segmentStart += t.segments[a.segment++].bytes;
  size_t n = 0;
  size_t skip = offset - a.segmentStart;
  for (size_t s = a.segment; s < t.segments.size() && n < max; ++s, skip = 0) {
    const IoSegment& piece = t.segments[s];
    if (piece.bytes > skip) out[n++] = {static_cast<uint8_t*>(piece.data) + skip, piece.bytes - skip};
  }
  return n;
}

bool awaits(std::span<const int> peers, int peer) {
  return std::find(peers.begin(), peers.end(), peer) != peers.end();
}

int firstWithMessage(Transport& transport, std::span<const int> peers) {
  for (int p : peers) {
    if (transport.unreceived(p)) return p;
  }
  return -1;
}

void markAwaited(ExchangeFault& fault, std::span<const int> peers) {
  if (fault.kind != ExchangeFault::Kind::TimedOut) return;
  for (int p : peers) fault.pending.push_back({p, false, sizeof(FrameHeader)});
}

bool acceptHeader(const FrameHeader& got, const Transfer& t, const FrameHeader& base, bool checkFingerprint,
                  ExchangeFault& fault) {
  if (t.sink != nullptr && got.magic == FrameHeader::kMagic) {
    if (t.sink->accept(got, fault)) return true;
    fault.peer = t.peer;
    fault.received = got;
    return false;
  }
  FrameHeader want = t.header != nullptr ? *t.header : base;
  want.bytes = t.bytes;
  if (got.magic != FrameHeader::kMagic) {
    fault.kind = ExchangeFault::Kind::Protocol;
  } else if (!got.agrees(want, checkFingerprint) || got.bytes != want.bytes) {
    fault.kind = ExchangeFault::Kind::HeaderMismatch;
  } else {
    return true;
  }
  fault.peer = t.peer;
  fault.expected = want;
  fault.received = got;
  fault.expectedBytes = t.bytes;
  return false;
}

namespace {

// Ranks that do not share `setup.rank`'s host.
std::vector<int> ranksElsewhere(const TransportSetup& setup) {
  std::vector<int> elsewhere;
  const std::string& mine = setup.peers[static_cast<size_t>(setup.rank)].hostId;
  for (int p = 0; p < setup.nranks; ++p) {
    if (setup.peers[static_cast<size_t>(p)].hostId != mine) elsewhere.push_back(p);
  }
  return elsewhere;
}

std::string shmUnreachable(const TransportSetup& setup) {
  std::vector<int> elsewhere = ranksElsewhere(setup);
  if (elsewhere.empty()) return {};
  return cat("rank(s) ", joinRanks(elsewhere), " run on another host than rank ", setup.rank, " (",
             setup.peers[static_cast<size_t>(setup.rank)].hostname, ")");
}

std::unique_ptr<Transport> connectShm(TransportSetup& setup) {
  // A name no other communicator uses: the job token and rank 0's pid.
  std::string unique;
  static constexpr char kHex[] = "0123456789abcdef";
  for (uint8_t b : setup.token) unique += {kHex[b >> 4], kHex[b & 15]};
  unique += cat("-", setup.peers[0].pid);
  return establishShm(setup.rank, setup.nranks, unique, setup.dataFds, setup.deadline);
}

bool shmAutoPicks(const TransportSetup& setup) {
  return ranksElsewhere(setup).empty();
}

#if VIGIL_HAVE_UCX
std::string ucxUnreachable(const TransportSetup&) {
  std::string why;
  return ucxAvailable(&why) ? std::string() : why;
}
// Across hosts with an RDMA device (InfiniBand, RoCE): what UCX is for.
bool ucxAutoPicks(const TransportSetup& setup) {
  return !ranksElsewhere(setup).empty() && rdmaDevicePresent() && ucxAvailable(nullptr);
}
#else
std::string ucxUnreachable(const TransportSetup&) {
  return "this libvigil was built without the ucx transport (VIGIL_UCX=OFF, or UCX's headers, Debian libucx-dev, were "
         "not found)";
}
bool ucxAutoPicks(const TransportSetup&) {
  return false;
}
std::unique_ptr<Transport> connectUcx(TransportSetup&) {
  return nullptr;  // never called: ucxUnreachable refuses first
}
#endif

bool tcpAutoPicks(const TransportSetup&) {
  return true;
}

std::string tcpUnreachable(const TransportSetup&) {
  return {};  // the mesh's data connections exist: the rendezvous made sure of it
}

std::unique_ptr<Transport> connectTcp(TransportSetup& setup) {
  return std::make_unique<TcpTransport>(std::move(setup.dataFds));
}

constexpr TransportRow kTransports[] = {
    {.kind = TransportKind::Shm,
     .name = "shm",
     .description = "byte rings and staging buffers in one shared segment (every rank on this host)",
     .capabilities = Capability::GatherScatter | Capability::LoadStore,
     .unreachable = shmUnreachable,
     .unavailable = Errc::NetShmUnavailable,
     .autoPicks = shmAutoPicks,
     .connect = connectShm},
    {.kind = TransportKind::Ucx,
     .name = "ucx",
     .description = "UCX tagged messages and RMA (verbs rc/ud/dc, tcp, shared memory; UCX_TLS chooses)",
     .capabilities = Capability::GatherScatter | Capability::Rma,
     .unreachable = ucxUnreachable,
     .unavailable = Errc::NetUcx,
     .autoPicks = ucxAutoPicks,
     .vote = true,
     .connect = connectUcx},
    {.kind = TransportKind::Tcp,
     .name = "tcp",
     .description = "one non-blocking data connection per peer",
     .capabilities = static_cast<Capabilities>(Capability::GatherScatter),
     .unreachable = tcpUnreachable,
     .autoPicks = tcpAutoPicks,
     .connect = connectTcp},
};

// One byte to and from every peer over the data connections: true when
// every rank said yes. Throws VG-BOOT-008 naming a rank that did not answer.
bool everyRankSaysYes(const TransportSetup& setup, bool mine) {
  const uint8_t vote = mine ? 1 : 0;
  auto lost = [&](int peer) {
    ErrorBuilder(Errc::BootMeshFailed)
        .rank(setup.rank, setup.nranks)
        .op("init")
        .cause("rank ", peer, " did not answer while the ranks chose their transport (it failed or exited)")
        .raise();
  };
  for (int p = 0; p < setup.nranks; ++p) {
    if (p != setup.rank &&
        sendAll(setup.dataFds[static_cast<size_t>(p)].get(), &vote, 1, setup.deadline) != IoStatus::Done) {
      lost(p);
    }
  }
  bool all = mine;
  for (int p = 0; p < setup.nranks; ++p) {
    if (p == setup.rank) continue;
    uint8_t theirs = 0;
    if (recvAll(setup.dataFds[static_cast<size_t>(p)].get(), &theirs, 1, setup.deadline) != IoStatus::Done) lost(p);
    all &= theirs == 1;
  }
  return all;
}

const TransportRow& rowOf(TransportKind kind) {
  for (const TransportRow& row : kTransports) {
    if (row.kind == kind) return row;
  }
  ErrorBuilder(Errc::Internal).op("init").cause("no transport row for VIGIL_TRANSPORT=", toString(kind)).raise();
}

}  // namespace

std::span<const TransportRow> transportTable() {
  return kTransports;
}

std::unique_ptr<Transport> connectTransport(TransportKind requested, TransportSetup& setup) {
  if (setup.nranks == 1) return connectTcp(setup);
  if (requested == TransportKind::Auto) {
    for (const TransportRow& row : kTransports) {
      bool picked = row.autoPicks(setup);
      if (row.vote) picked = everyRankSaysYes(setup, picked);
      if (picked) return row.connect(setup);
    }
    ErrorBuilder(Errc::Internal)
        .rank(setup.rank, setup.nranks)
        .op("init")
        .cause("no transport reaches the ranks")
        .raise();
  }
  const TransportRow& row = rowOf(requested);
  if (std::string why = row.unreachable(setup); !why.empty()) {
    ErrorBuilder(row.unavailable)
        .rank(setup.rank, setup.nranks)
        .op("init")
        .cause("VIGIL_TRANSPORT=", row.name, ", but ", why)
        .raise();
  }
  return row.connect(setup);
}

}  // namespace vigil
