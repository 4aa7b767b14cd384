#include "comm/flight_recorder.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string_view>

#include "core/errors.hpp"

namespace vigil {
namespace {

int64_t realtimeNs() {
  // system_clock is CLOCK_REALTIME: dumps of different hosts line up on one time axis.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Length of the valid UTF-8 sequence starting at s[i] (Unicode table 3-7: no overlongs, no
// surrogates, nothing above U+10FFFF), or 0 if it is not one.
size_t utf8SequenceLength(std::string_view s, size_t i) {
  auto byteAt = [&](size_t k) -> unsigned { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned lead = byteAt(0);
  unsigned low = 0x80, high = 0xBF;
  size_t length = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (byteAt(1) < low || byteAt(1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if ((byteAt(k) & 0xC0) != 0x80) return 0;
  }
  return length;
}

// States only move forward: a late started() or an abort that fails every open entry must not
// rewrite an operation that already finished.
bool isFinished(FlightState state) {
  return state == FlightState::Completed || state == FlightState::Failed;
}

void appendEntry(std::string& out, const FlightEntry& e) {
  out += "{\"id\":" + std::to_string(e.id);
  out += ",\"seq\":" + std::to_string(e.seq);
  out += ",\"op\":" + jsonQuote(opName(e.op));
  out += ",\"dtype\":" + jsonQuote(dtypeName(e.dtype));
  out += ",\"redop\":" + (e.hasRedop ? jsonQuote(redOpName(e.redop)) : std::string("null"));
  out += ",\"count\":" + std::to_string(e.count);
  out += ",\"root\":" + std::to_string(e.root);
  out += ",\"peers\":[";
  for (size_t i = 0; i < e.peers.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(e.peers[i]);
  }
  out += "],\"stream\":" + jsonQuote(e.stream);
  out += ",\"state\":" + jsonQuote(flightStateName(e.state));
  out += ",\"enqueued_ns\":" + std::to_string(e.enqueuedNs);
  out += ",\"started_ns\":" + std::to_string(e.startedNs);
  out += ",\"ended_ns\":" + std::to_string(e.endedNs);
  out += ",\"error\":" + (e.state == FlightState::Failed || !e.error.empty() ? jsonQuote(e.error) : "null");
  out += "}";
}

}  // namespace

const char* flightStateName(FlightState state) {
  switch (state) {
    case FlightState::Enqueued: return "enqueued";
    case FlightState::Started: return "started";
    case FlightState::Completed: return "completed";
    case FlightState::Failed: return "failed";
  }
  return "unknown";
}

std::string jsonQuote(const std::string& text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t length = utf8SequenceLength(text, i);
      out += length ? text.substr(i, length) : "\\ufffd";
      i += length ? length : 1;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  return out + "\"";
}

FlightRecorder::FlightRecorder(size_t capacity) : slots_(capacity) {}

FlightEntry* FlightRecorder::slotFor(uint64_t id) {
  if (id == 0 || id >= nextId_) return nullptr;
  FlightEntry& slot = slots_[id % slots_.size()];
  return slot.id == id ? &slot : nullptr;
}

uint64_t FlightRecorder::enqueue(FlightEntry entry) {
  if (slots_.empty()) return 0;
  if (entry.enqueuedNs == 0) entry.enqueuedNs = realtimeNs();
  std::lock_guard lock(mutex_);
  entry.id = nextId_++;
  slots_[entry.id % slots_.size()] = std::move(entry);
  return nextId_ - 1;
}

void FlightRecorder::started(uint64_t id, int64_t seq) {
  if (slots_.empty()) return;
  const int64_t now = realtimeNs();
  std::lock_guard lock(mutex_);
  FlightEntry* entry = slotFor(id);
  if (entry && entry->state == FlightState::Enqueued) {
    entry->state = FlightState::Started;
    entry->startedNs = now;
    if (seq >= 0) entry->seq = seq;  // a queued collective gets its number when it starts
  }
}

void FlightRecorder::completed(uint64_t id) {
  if (slots_.empty()) return;
  const int64_t now = realtimeNs();
  std::lock_guard lock(mutex_);
  FlightEntry* entry = slotFor(id);
  if (entry && !isFinished(entry->state)) {
    entry->state = FlightState::Completed;
    if (entry->startedNs == 0) entry->startedNs = now;  // completed without a separate start
    entry->endedNs = now;
    if (entry->seq > lastCompletedSeq_) lastCompletedSeq_ = entry->seq;
  }
}

void FlightRecorder::failed(uint64_t id, const std::string& error) {
  if (slots_.empty()) return;
  const int64_t now = realtimeNs();
  std::string text = error;  // copied outside the lock: the one allocation an update may make
  std::lock_guard lock(mutex_);
  FlightEntry* entry = slotFor(id);
  if (entry && !isFinished(entry->state)) {
    entry->state = FlightState::Failed;
    entry->endedNs = now;
    entry->error = std::move(text);
  }
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::lock_guard lock(mutex_);
  std::vector<FlightEntry> entries;
  if (slots_.empty()) return entries;
  const uint64_t total = nextId_ - 1;
  const uint64_t first = total > slots_.size() ? total - slots_.size() + 1 : 1;
  entries.reserve(total - first + 1);
  for (uint64_t id = first; id <= total; ++id) entries.push_back(slots_[id % slots_.size()]);
  return entries;
}

int64_t FlightRecorder::lastCompletedSeq() const {
  std::lock_guard lock(mutex_);
  return lastCompletedSeq_;
}

std::string FlightRecorder::toJson(int rank, int nranks, const std::string& comm, const std::string& reason) const {
  const std::vector<FlightEntry> entries = snapshot();
  std::string out = "{\"vigil_flight_recorder\":1";
  out += ",\"rank\":" + std::to_string(rank);
  out += ",\"nranks\":" + std::to_string(nranks);
  out += ",\"comm\":" + jsonQuote(comm);
  out += ",\"pid\":" + std::to_string(getpid());
  out += ",\"host\":" + jsonQuote(hostName());
  out += ",\"reason\":" + jsonQuote(reason);
  out += ",\"dumped_ns\":" + std::to_string(realtimeNs());
  out += ",\"capacity\":" + std::to_string(slots_.size());
  out += ",\"last_completed_seq\":" + std::to_string(lastCompletedSeq());
  out += ",\"entries\":[";
  for (size_t i = 0; i < entries.size(); ++i) {
    out += i ? ",\n" : "\n";  // one entry per line keeps a dump readable with grep and less
    appendEntry(out, entries[i]);
  }
  out += "]}\n";
  return out;
}

std::string FlightRecorder::writeJson(const std::string& path, int rank, int nranks, const std::string& comm,
                                      const std::string& reason) const {
  const std::string json = toJson(rank, nranks, comm, reason);
  // Written beside the target and renamed, so a reader (or a crash mid-write) never sees half a dump.
  const std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(tmp.c_str(), "w"), &std::fclose);
  if (!file) return cat("cannot create flight-recorder dump '", tmp, "': ", errnoText(errno));
  const bool written = std::fwrite(json.data(), 1, json.size(), file.get()) == json.size();
  int err = errno;
  const bool closed = std::fclose(file.release()) == 0;
  if (written && !closed) err = errno;
  if (!written || !closed) {
    std::remove(tmp.c_str());
    return cat("cannot write flight-recorder dump '", tmp, "': ", errnoText(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    return cat("cannot rename flight-recorder dump '", tmp, "' to '", path, "': ", errnoText(err));
  }
  return "";
}

std::string FlightRecorder::dumpPath(const std::string& dir, const std::string& comm, int rank) {
  std::string safeComm = comm.empty() ? "comm" : comm;
  for (char& c : safeComm) {
    const bool safe =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!safe) c = '_';
  }
  std::string prefix = dir.empty() ? "." : dir;
  if (prefix.back() != '/') prefix += '/';
  return cat(prefix, "vigil-", safeComm, "-rank", rank, ".json");
}

}  // namespace vigil
