// The flight recorder keeps the last N operations of a communicator and writes them as JSON
// that vigil-doctor reads back. These tests pin the ring semantics, the state machine and the
// exact JSON schema (parsed with nlohmann::json, which the core library itself must not use).

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "comm/flight_recorder.hpp"

namespace vigil {
namespace {

using nlohmann::json;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

FlightEntry allreduce(int64_t seq, uint64_t count = 1024) {
  FlightEntry e;
  e.seq = seq;
  e.op = OpKind::AllReduce;
  e.dtype = vigilFloat32;
  e.redop = vigilSum;
  e.hasRedop = true;
  e.count = count;
  e.stream = "null";
  return e;
}

// A fresh directory under TMPDIR, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "vigil-fr-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(FlightRecorder, DisabledRecorderIgnoresEverything) {
  FlightRecorder recorder(0);
  EXPECT_FALSE(recorder.enabled());
  EXPECT_EQ(recorder.enqueue(allreduce(0)), 0u);
  recorder.started(0);
  recorder.completed(0);
  recorder.failed(0, "ignored");
  EXPECT_TRUE(recorder.snapshot().empty());
  EXPECT_EQ(recorder.lastCompletedSeq(), -1);
  const json dump = json::parse(recorder.toJson(0, 1, "c0", "on demand"));
  EXPECT_EQ(dump["capacity"], 0);
  EXPECT_EQ(dump["last_completed_seq"], -1);
  EXPECT_TRUE(dump["entries"].is_array());
  EXPECT_TRUE(dump["entries"].empty());
}

TEST(FlightRecorder, WrapKeepsTheLastNOldestFirst) {
  FlightRecorder recorder(3);
  std::vector<uint64_t> ids;
  for (int64_t seq = 0; seq < 5; ++seq) ids.push_back(recorder.enqueue(allreduce(seq)));
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 3, 4, 5}));

  const auto entries = recorder.snapshot();
  ASSERT_EQ(entries.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(entries[i].id, i + 3);
    EXPECT_EQ(entries[i].seq, static_cast<int64_t>(i + 2));
  }

  // id 1 and 2 were overwritten by ids 4 and 5: their updates must not touch the new occupants.
  recorder.completed(ids[0]);
  recorder.failed(ids[1], "late failure");
  recorder.started(99);  // never issued
  for (const FlightEntry& e : recorder.snapshot()) {
    EXPECT_EQ(e.state, FlightState::Enqueued) << "id " << e.id;
    EXPECT_TRUE(e.error.empty());
  }
  EXPECT_EQ(recorder.lastCompletedSeq(), -1);
}

TEST(FlightRecorder, PartiallyFilledRingHasOnlyIssuedEntries) {
  FlightRecorder recorder(8);
  recorder.enqueue(allreduce(0));
  recorder.enqueue(allreduce(1));
  const auto entries = recorder.snapshot();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].seq, 0);
  EXPECT_EQ(entries[1].seq, 1);
}

TEST(FlightRecorder, StatesAndTimestampsMoveForward) {
  FlightRecorder recorder(4);
  const int64_t before = nowNs();
  const uint64_t id = recorder.enqueue(allreduce(7));
  auto entry = [&] { return recorder.snapshot().back(); };
  EXPECT_EQ(entry().state, FlightState::Enqueued);
  EXPECT_GE(entry().enqueuedNs, before);
  EXPECT_LE(entry().enqueuedNs, nowNs());
  EXPECT_EQ(entry().startedNs, 0);
  EXPECT_EQ(entry().endedNs, 0);

  recorder.started(id);
  EXPECT_EQ(entry().state, FlightState::Started);
  EXPECT_GE(entry().startedNs, entry().enqueuedNs);
  EXPECT_EQ(entry().endedNs, 0);
  EXPECT_EQ(recorder.lastCompletedSeq(), -1);

  recorder.completed(id);
  EXPECT_EQ(entry().state, FlightState::Completed);
  EXPECT_GE(entry().endedNs, entry().startedNs);
  EXPECT_EQ(recorder.lastCompletedSeq(), 7);

  // A late start or failure does not rewrite a finished operation.
  const int64_t ended = entry().endedNs;
  recorder.started(id);
  recorder.failed(id, "abort after completion");
  EXPECT_EQ(entry().state, FlightState::Completed);
  EXPECT_EQ(entry().endedNs, ended);
  EXPECT_TRUE(entry().error.empty());
}

TEST(FlightRecorder, FailureKeepsErrorAndCallerTimestamp) {
  FlightRecorder recorder(4);
  FlightEntry send;
  send.op = OpKind::Send;
  send.peers = {3};
  send.stream = "s2";
  send.enqueuedNs = 1234;  // a caller-supplied enqueue time is kept
  const uint64_t id = recorder.enqueue(send);
  recorder.started(id);
  recorder.failed(id, "VG-PEER-001: peer 3 died");
  const FlightEntry e = recorder.snapshot().back();
  EXPECT_EQ(e.enqueuedNs, 1234);
  EXPECT_EQ(e.state, FlightState::Failed);
  EXPECT_EQ(e.error, "VG-PEER-001: peer 3 died");
  EXPECT_GT(e.endedNs, 0);
  EXPECT_EQ(recorder.lastCompletedSeq(), -1);  // failures and point-to-point never count
}

TEST(FlightRecorder, JsonHasTheDocumentedFieldsAndValues) {
  FlightRecorder recorder(16);
  const uint64_t done = recorder.enqueue(allreduce(41, 1024));
  recorder.started(done);
  recorder.completed(done);
  FlightEntry bcast;
  bcast.seq = 42;
  bcast.op = OpKind::Broadcast;
  bcast.dtype = vigilBfloat16;
  bcast.count = 7;
  bcast.root = 2;
  bcast.stream = "s3";
  const uint64_t open = recorder.enqueue(bcast);
  recorder.started(open);
  FlightEntry recv;
  recv.op = OpKind::Recv;
  recv.dtype = vigilInt64;
  recv.peers = {1, 3};
  recv.stream = "null";
  const uint64_t failedId = recorder.enqueue(recv);
  recorder.failed(failedId, "boom");

  const int64_t before = nowNs();
  const json dump = json::parse(recorder.toJson(2, 4, "c1a2", "timeout"));
  EXPECT_EQ(dump["vigil_flight_recorder"], 1);
  EXPECT_EQ(dump["rank"], 2);
  EXPECT_EQ(dump["nranks"], 4);
  EXPECT_EQ(dump["comm"], "c1a2");
  EXPECT_EQ(dump["pid"], getpid());
  EXPECT_TRUE(dump["host"].is_string());
  EXPECT_FALSE(dump["host"].get<std::string>().empty());
  EXPECT_EQ(dump["reason"], "timeout");
  EXPECT_GE(dump["dumped_ns"].get<int64_t>(), before);
  EXPECT_EQ(dump["capacity"], 16);
  EXPECT_EQ(dump["last_completed_seq"], 41);
  const json& entries = dump["entries"];
  ASSERT_EQ(entries.size(), 3u);

  const json& first = entries[0];
  const std::vector<std::string> keys = {"id",    "seq",    "op",    "dtype",       "redop",      "count",    "root",
                                         "peers", "stream", "state", "enqueued_ns", "started_ns", "ended_ns", "error"};
  EXPECT_EQ(first.size(), keys.size());
  for (const std::string& key : keys) EXPECT_TRUE(first.contains(key)) << key;
  EXPECT_EQ(first["id"], 1);
  EXPECT_EQ(first["seq"], 41);
  EXPECT_EQ(first["op"], "allreduce");
  EXPECT_EQ(first["dtype"], "float32");
  EXPECT_EQ(first["redop"], "sum");
  EXPECT_EQ(first["count"], 1024);
  EXPECT_EQ(first["root"], -1);
  EXPECT_EQ(first["peers"], json::array());
  EXPECT_EQ(first["stream"], "null");
  EXPECT_EQ(first["state"], "completed");
  EXPECT_GT(first["enqueued_ns"].get<int64_t>(), 0);
  EXPECT_GE(first["ended_ns"].get<int64_t>(), first["started_ns"].get<int64_t>());
  EXPECT_TRUE(first["error"].is_null());

  const json& second = entries[1];
  EXPECT_EQ(second["op"], "broadcast");
  EXPECT_EQ(second["dtype"], "bfloat16");
  EXPECT_TRUE(second["redop"].is_null());
  EXPECT_EQ(second["root"], 2);
  EXPECT_EQ(second["stream"], "s3");
  EXPECT_EQ(second["state"], "started");
  EXPECT_EQ(second["ended_ns"], 0);

  const json& third = entries[2];
  EXPECT_EQ(third["seq"], -1);
  EXPECT_EQ(third["op"], "recv");
  EXPECT_EQ(third["dtype"], "int64");
  EXPECT_EQ(third["peers"], json::array({1, 3}));
  EXPECT_EQ(third["state"], "failed");
  EXPECT_EQ(third["started_ns"], 0);  // failed while still queued
  EXPECT_EQ(third["error"], "boom");
}

TEST(FlightRecorder, JsonEscapesErrorTextExactly) {
  const std::string nasty = std::string("say \"hi\" C:\\path\nline2\r\ttab\b\f") + '\x01' + '\x1f' + "\x7f end";
  FlightRecorder recorder(2);
  const uint64_t id = recorder.enqueue(allreduce(0));
  recorder.failed(id, nasty);
  const std::string text = recorder.toJson(0, 1, "comm \"q\"\n", "abort\\");
  EXPECT_NE(text.find(R"(say \"hi\" C:\\path\nline2\r\ttab\b\f\u0001\u001f)"), std::string::npos) << text;
  const json dump = json::parse(text);
  EXPECT_EQ(dump["entries"][0]["error"], nasty);
  EXPECT_EQ(dump["comm"], "comm \"q\"\n");
  EXPECT_EQ(dump["reason"], "abort\\");
}

TEST(FlightRecorder, JsonKeepsUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(jsonQuote("caf\xc3\xa9 \xe2\x9c\x93"), "\"caf\xc3\xa9 \xe2\x9c\x93\"");
  // A lone continuation byte, a truncated sequence, an overlong '/' and a surrogate.
  EXPECT_EQ(jsonQuote("a\x80z"), R"("a\ufffdz")");
  EXPECT_EQ(jsonQuote("a\xe2\x9c"), R"("a\ufffd\ufffd")");
  EXPECT_EQ(jsonQuote("\xc0\xaf"), R"("\ufffd\ufffd")");
  EXPECT_EQ(jsonQuote("\xed\xa0\x80"), R"("\ufffd\ufffd\ufffd")");
  EXPECT_EQ(json::parse(jsonQuote("x\xff\xfe y")), "x\xef\xbf\xbd\xef\xbf\xbd y");
}

TEST(FlightRecorder, WriteJsonCreatesTheFileAtomically) {
  TempDir dir;
  FlightRecorder recorder(4);
  recorder.completed(recorder.enqueue(allreduce(0)));
  const std::string path = FlightRecorder::dumpPath(dir.path(), "c9", 1);
  EXPECT_EQ(path, dir.path() + "/vigil-c9-rank1.json");
  EXPECT_EQ(recorder.writeJson(path, 1, 2, "c9", "on demand"), "");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const json dump = json::parse(text.str());
  EXPECT_EQ(dump["rank"], 1);
  EXPECT_EQ(dump["reason"], "on demand");
  EXPECT_EQ(dump["entries"][0]["state"], "completed");

  // Writing again replaces the old dump.
  EXPECT_EQ(recorder.writeJson(path, 1, 2, "c9", "second"), "");
  std::ifstream again(path);
  EXPECT_EQ(json::parse(again)["reason"], "second");
}

TEST(FlightRecorder, WriteJsonReportsAnUnwritableDirectory) {
  FlightRecorder recorder(4);
  const std::string path = "/nonexistent-vigil-dir/vigil-c9-rank0.json";
  const std::string error = recorder.writeJson(path, 0, 1, "c9", "timeout");
  EXPECT_NE(error.find("cannot create flight-recorder dump '" + path + ".tmp'"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
}

TEST(FlightRecorder, DumpPathSanitisesTheCommName) {
  EXPECT_EQ(FlightRecorder::dumpPath("/d/", "c1a2", 0), "/d/vigil-c1a2-rank0.json");
  EXPECT_EQ(FlightRecorder::dumpPath("/d", "../x y", 12), "/d/vigil-.._x_y-rank12.json");
  EXPECT_EQ(FlightRecorder::dumpPath("", "c", 3), "./vigil-c-rank3.json");
}

TEST(FlightRecorder, ConcurrentUpdatesKeepEveryEntryConsistent) {
  FlightRecorder recorder(64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&recorder, t] {
      for (int i = 0; i < 500; ++i) {
        const uint64_t id = recorder.enqueue(allreduce(t * 1000 + i));
        recorder.started(id);
        if (i % 7 == 0) recorder.failed(id, "odd one");
        recorder.completed(id);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const auto entries = recorder.snapshot();
  ASSERT_EQ(entries.size(), 64u);
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(entries[i].id, 2000 - 64 + 1 + i);
    EXPECT_TRUE(entries[i].state == FlightState::Completed || entries[i].state == FlightState::Failed);
  }
  EXPECT_EQ(recorder.lastCompletedSeq(), 3499);
  EXPECT_TRUE(json::accept(recorder.toJson(0, 1, "c", "x")));
}

}  // namespace
}  // namespace vigil
