// vigilCommSplit: one all-gather over the parent, then direct connections.
//
// Every rank of the parent contributes a fixed-size record (color, key, and,
// for a rank that joins a child, the address of a listener it opened for the
// child's connections). The gather runs as a collective of the parent, so it
// is numbered, fingerprinted ("split") and guarded by the parent's deadline
// like any other: ranks that call split while another calls an allreduce get
// vigilMismatch, not a hang. Each child's members then know each other's
// addresses and the child's token (derived from the parent's token and the
// gathered records, so it is the same on every member and differs for every
// split), and build the child's mesh as init does, minus the rendezvous.

#include <algorithm>
#include <cstring>

#include "comm/communicator.hpp"
#include "core/log.hpp"

namespace vigil {

namespace {

// color i32, key i32, listen address (packed), zero padding.
constexpr size_t kRecordBytes = 32;
static_assert(8 + SocketAddress::kPackedBytes <= kRecordBytes);

struct SplitRecord {
  int32_t color = -1;
  int32_t key = 0;
  SocketAddress address;
};

void packRecord(const SplitRecord& r, uint8_t* out) {
  std::memset(out, 0, kRecordBytes);
  std::memcpy(out, &r.color, 4);
  std::memcpy(out + 4, &r.key, 4);
  if (r.color >= 0) r.address.pack(out + 8);
}

SplitRecord unpackRecord(const uint8_t* in) {
  SplitRecord r;
  std::memcpy(&r.color, in, 4);
  std::memcpy(&r.key, in + 4, 4);
  if (r.color >= 0) r.address = SocketAddress::unpack(in + 8);
  return r;
}

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}

// The child's token: the same on every member, different for every split
// (the records hold the members' fresh listen ports) and for every color.
JobToken childToken(const JobToken& parent, const std::vector<uint8_t>& records, int32_t color) {
  uint64_t a = 0x76696769u, b = 0x6c73706cu;
  for (uint8_t byte : parent) a = mix(a, byte);
  for (size_t i = 0; i + 8 <= records.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, records.data() + i, 8);
    a = mix(a, word);
    b = mix(b, word ^ a);
  }
  a = mix(a, static_cast<uint32_t>(color));
  b = mix(b, a);
  JobToken token;
  std::memcpy(token.data(), &a, 8);
  std::memcpy(token.data() + 8, &b, 8);
  return token;
}

}  // namespace

std::vector<uint8_t> Communicator::gatherSplitRecords(std::span<const uint8_t> mine) {
  std::vector<uint8_t> records(mine.size() * static_cast<size_t>(nranks_));
  run(OpDesc{
      .kind = OpKind::Split, .send = mine.data(), .recv = records.data(), .count = mine.size(), .dtype = vigilUint8});
  return records;
}

void Communicator::checkSplitMembers(std::span<const int> members) {
  const State state = state_.load();
  if (state == State::Aborted || state == State::Destroyed || control_.poisoned()) {
    error(Errc::CommAborted)
        .op("split")
        .cause("communicator '", name_, "' was ",
               state == State::Destroyed ? "destroyed"
               : state == State::Aborted ? "aborted (vigilCommAbort)"
                                         : "stopped by an error",
               " while this rank connected to the members of the new communicator")
        .raise();
  }
  // The earliest to go first: a member that left because of another is a bystander.
  for (int gone : control_.peersNotAlive()) {
    const PeerState peer = control_.peer(gone);
    const bool member = std::find(members.begin(), members.end(), gone) != members.end();
    if (!member || peer.status == PeerState::Status::Alive) continue;  // not ours, or only finalizing
    Error e = faults_.peerGone(gone, peer, op_);
    {
      std::lock_guard lock(errorMutex_);
      lastCause_ = e;  // what a goodbye of ours quotes
    }
    throw e;
  }
}

std::shared_ptr<Communicator> Communicator::splitAs(int color, int key, const std::string& suffix, int timeoutMs,
                                                    const std::string& timeoutSource) {
  checkUsable();
  const auto started = Clock::now();
  const uint32_t index = splits_.fetch_add(1);
  const EnvConfig& env = processConfig();

  SplitRecord mine;
  mine.color = color < 0 ? -1 : color;
  mine.key = key;
  std::optional<Listener> listener;
  if (mine.color >= 0) {
    listener = listenInRange(selectInterfaceAddress(env.socketIfname), env.portRange, "split connections");
    mine.address = listener->address;
  }
  uint8_t packed[kRecordBytes];
  packRecord(mine, packed);
  const std::vector<uint8_t> records = gatherSplitRecords(packed);
  if (mine.color < 0) return nullptr;

  // The members, ordered by (key, rank in the parent).
  std::vector<std::pair<int32_t, int>> byKey;
  std::vector<SplitRecord> decoded(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    decoded[static_cast<size_t>(r)] = unpackRecord(records.data() + kRecordBytes * static_cast<size_t>(r));
    if (decoded[static_cast<size_t>(r)].color == mine.color) byKey.emplace_back(decoded[static_cast<size_t>(r)].key, r);
  }
  std::sort(byKey.begin(), byKey.end());
  const int n = static_cast<int>(byKey.size());
  int newRank = -1;
  std::vector<int> members(static_cast<size_t>(n));  // by new rank: the rank here
  std::vector<PeerInfo> peers(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int old = byKey[static_cast<size_t>(i)].second;
    if (old == rank_) newRank = i;
    members[static_cast<size_t>(i)] = old;
    peers[static_cast<size_t>(i)] = peers_[static_cast<size_t>(old)];
    peers[static_cast<size_t>(i)].address = decoded[static_cast<size_t>(old)].address;
  }

  const JobToken token = childToken(token_, records, mine.color);
  CommConfig config = config_;
  config.groupName.clear();  // the parent's group ranks do not fit the child
  config.groupRanks.clear();
  config.name = suffix.empty() ? cat(name_, "/", index, ".", mine.color) : cat(name_, "/", suffix);
  config.timeoutMs = timeoutMs;
  config.timeoutSource = timeoutSource;
  const Deadline deadline = Deadline::afterMs(config_.connectTimeoutMs);
  // While the members connect, this communicator still watches them: a
  // member that dies, or an abort of this communicator, ends the wait at
  // once with the real cause, not a connect timeout blaming the network.
  EventFd news;
  control_.addWatcher(&news);
  news.signal();  // news from before it was watched: the first wait checks at once
  struct Unwatch {
    ControlPlane& control;
    const EventFd& fd;
    ~Unwatch() { control.removeWatcher(&fd); }
  } unwatch{control_, news};
  MeshWatch watch;
  watch.wakeFd = news.fd();
  watch.check = [&] {
    news.clear();  // then read the state: a later change signals again
    checkSplitMembers(members);
  };
  Mesh mesh = connectMesh(*listener, peers, newRank, token, VIGIL_VERSION_CODE, deadline, &watch);
  listener.reset();
  std::string name = config.name;
  std::shared_ptr<Communicator> child =
      assemble(newRank, n, config, std::move(name), std::move(peers), token, std::move(mesh), deadline);
  VIGIL_LOG_AT(LogLevel::Info, rank_, "communicator '", child->name_, "' split from '", name_, "' (color ", mine.color,
               ", key ", key, "): rank ", newRank, "/", n, " over ", child->transportName(), " in ",
               static_cast<int>(secondsSince(started) * 1000), " ms");
  return child;
}

}  // namespace vigil
