// The non-blocking framed reader, the in-place framed writer and the
// accept-and-preamble helper, over socket pairs and a loopback listener.

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <string>
#include <vector>

#include "net/acceptor.hpp"
#include "net/framed_reader.hpp"
#include "net/wire.hpp"

namespace vigil {
namespace {

struct Pair {
  Fd reader;
  Fd writer;
};

Pair socketPair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  return {Fd(fds[0]), Fd(fds[1])};
}

void writeBytes(int fd, const void* data, size_t n) {
  ASSERT_EQ(::send(fd, data, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
}

TEST(FrameWriter, WritesWhatSendMessageWrites) {
  Pair pair = socketPair();
  const std::vector<uint8_t> payload{7, 8, 9};
  ASSERT_EQ(sendMessage(pair.writer.get(), payload, Deadline::afterMs(1000)), IoStatus::Done);
  std::vector<uint8_t> sent(4 + payload.size());
  ASSERT_EQ(recvAll(pair.reader.get(), sent.data(), sent.size(), Deadline::afterMs(1000)), IoStatus::Done);
  FrameWriter w;
  w.put<uint8_t>(7).put<uint8_t>(8).put<uint8_t>(9);
  EXPECT_EQ(w.frame(), sent);
}

TEST(FramedReader, AssemblesMessagesAcrossPartialReads) {
  Pair pair = socketPair();
  FramedReader reader(16);
  EXPECT_EQ(reader.read(pair.reader.get()), ReadStatus::NeedMore);
  FrameWriter first;
  first.putString("hello");  // 4 + 5 bytes of payload
  const std::vector<uint8_t>& bytes = first.frame();
  writeBytes(pair.writer.get(), bytes.data(), 2);  // half the length
  EXPECT_EQ(reader.read(pair.reader.get()), ReadStatus::NeedMore);
  writeBytes(pair.writer.get(), bytes.data() + 2, 6);  // the length and some payload
  EXPECT_EQ(reader.read(pair.reader.get()), ReadStatus::NeedMore);
  writeBytes(pair.writer.get(), bytes.data() + 8, bytes.size() - 8);
  FrameWriter second;
  second.put<uint32_t>(42);
  writeBytes(pair.writer.get(), second.frame().data(), second.frame().size());
  ASSERT_EQ(reader.read(pair.reader.get()), ReadStatus::Complete);
  EXPECT_EQ(WireReader(reader.payload()).getString(), "hello");
  ASSERT_EQ(reader.read(pair.reader.get()), ReadStatus::Complete);
  EXPECT_EQ(WireReader(reader.payload()).get<uint32_t>(), 42u);
  EXPECT_EQ(reader.read(pair.reader.get()), ReadStatus::NeedMore);
  pair.writer.reset();
  EXPECT_EQ(reader.read(pair.reader.get()), ReadStatus::Closed);
}

TEST(FramedReader, RefusesALengthAboveTheLimitBeforeReadingThePayload) {
  Pair pair = socketPair();
  FramedReader reader(16);
  const uint32_t length = 17;
  writeBytes(pair.writer.get(), &length, sizeof length);
  EXPECT_EQ(reader.read(pair.reader.get()), ReadStatus::TooLarge);
  EXPECT_EQ(reader.length(), 17u);
  EXPECT_TRUE(reader.payload().empty());
}

TEST(PreambleReader, ReadsThePreambleAndNothingAfterIt) {
  Pair pair = socketPair();
  Preamble sent;
  sent.rank = 3;
  writeBytes(pair.writer.get(), &sent, 10);
  PreambleReader reader;
  EXPECT_EQ(reader.read(pair.reader.get()), ReadStatus::NeedMore);
  writeBytes(pair.writer.get(), reinterpret_cast<const uint8_t*>(&sent) + 10, sizeof sent - 10);
  const uint8_t after = 5;
  writeBytes(pair.writer.get(), &after, 1);
  ASSERT_EQ(reader.read(pair.reader.get()), ReadStatus::Complete);
  EXPECT_EQ(reader.preamble().rank, 3);
  uint8_t next = 0;
  EXPECT_EQ(::recv(pair.reader.get(), &next, 1, 0), 1);
  EXPECT_EQ(next, 5);
}

// Connects to `listener` and sends `preamble` (or closes at once when null).
Fd connectAndSend(const Listener& listener, const Preamble* preamble) {
  std::string error;
  Fd fd = connectWithRetry(listener.address, Deadline::afterMs(5000), -1, &error);
  EXPECT_TRUE(fd.valid()) << error;
  if (preamble != nullptr) {
    EXPECT_EQ(sendAll(fd.get(), preamble, sizeof *preamble, Deadline::afterMs(5000)), IoStatus::Done);
  }
  return fd;
}

TEST(PreambleAcceptor, HandsOverThisJobsConnectionsAndReportsTheOthers) {
  Listener listener = listenInRange(resolveAddress("127.0.0.1", 0), PortRange{}, "test listener");
  const JobToken token = randomToken();
  std::vector<int> accepted;
  std::vector<PreambleRejection> rejected;
  PreambleAcceptor acceptor(
      token, [&](AcceptedConnection conn) { accepted.push_back(conn.preamble.rank); },
      [&](const std::string&, PreambleRejection why, int) { rejected.push_back(why); });
  Preamble good;
  good.token = token;
  good.rank = 1;
  Preamble otherJob = good;
  otherJob.token = randomToken();
  Preamble notVigil = good;
  notVigil.magic = 0;
  std::vector<Fd> clients;
  for (const Preamble* p : std::vector<const Preamble*>{&good, &otherJob, &notVigil, nullptr}) {
    clients.push_back(connectAndSend(listener, p));
  }
  clients.back().reset();  // closes before its preamble
  std::vector<pollfd> fds;
  Deadline deadline = Deadline::afterMs(10000);
  while (accepted.size() + rejected.size() < 4 && !deadline.expired()) {
    fds.clear();
    fds.push_back({listener.fd.get(), POLLIN, 0});
    Deadline wake = acceptor.addPollFds(fds, deadline);
    ASSERT_GE(::poll(fds.data(), fds.size(), wake.pollTimeoutMs()), 0);
    acceptor.service(fds.data() + 1, fds.size() - 1);
    if (fds[0].revents & POLLIN) acceptor.acceptAll(listener.fd.get());
  }
  EXPECT_EQ(accepted, std::vector<int>{1});
  ASSERT_EQ(rejected.size(), 3u);
  EXPECT_EQ(acceptor.size(), 0u);
  std::sort(rejected.begin(), rejected.end());
  EXPECT_EQ(rejected, (std::vector<PreambleRejection>{PreambleRejection::Closed, PreambleRejection::NotVigil,
                                                      PreambleRejection::OtherJob}));
}

}  // namespace
}  // namespace vigil
