// The transport table and what every transport shares: the pieces of a
// payload, and the judgement of an incoming frame header.

#include "transport/transport.hpp"

#include "core/strcat.hpp"
#include "transport/shm_transport.hpp"
#include "transport/tcp_transport.hpp"

namespace vigil {

size_t payloadPieces(ActiveTransfer& a, size_t offset, iovec* out, size_t max) {
  const Transfer& t = *a.transfer;
  if (offset >= t.bytes || max == 0) return 0;
  if (t.segments.empty()) {
    auto* base = static_cast<uint8_t*>(t.isSend ? const_cast<void*>(t.sendData) : t.recvData);
    out[0] = {base + offset, t.bytes - offset};
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

bool acceptHeader(const FrameHeader& got, const Transfer& t, const FrameHeader& base, bool checkFingerprint,
                  ExchangeFault& fault) {
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
     .connect = connectShm},
    {.kind = TransportKind::Tcp,
     .name = "tcp",
     .description = "one non-blocking data connection per peer",
     .capabilities = static_cast<Capabilities>(Capability::GatherScatter),
     .unreachable = tcpUnreachable,
     .connect = connectTcp},
};

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
      if (row.unreachable(setup).empty()) return row.connect(setup);
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
