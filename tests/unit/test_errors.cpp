// The error table is the single source of ids; docs/errors.md must document
// exactly those ids with the same result codes, and messages have one shape.

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "core/errors.hpp"
#include "net/wire.hpp"
#include "vigil/vigil.h"

namespace vigil {
namespace {

const char* resultName(vigilResult_t r) {
  switch (r) {
    case vigilSuccess: return "vigilSuccess";
    case vigilInvalidArgument: return "vigilInvalidArgument";
    case vigilInvalidUsage: return "vigilInvalidUsage";
    case vigilSystemError: return "vigilSystemError";
    case vigilInternalError: return "vigilInternalError";
    case vigilRemoteError: return "vigilRemoteError";
    case vigilTimeout: return "vigilTimeout";
    case vigilMismatch: return "vigilMismatch";
    case vigilAborted: return "vigilAborted";
    case vigilInProgress: return "vigilInProgress";
    case vigilNumericError: return "vigilNumericError";
  }
  return "?";
}

TEST(ErrorTable, IdsAreUniqueAndWellFormed) {
  std::set<std::string> seen;
  const std::regex shape("VG-[A-Z]+-[0-9]{3}");
  for (const ErrcInfo& info : allErrcInfo()) {
    EXPECT_TRUE(std::regex_match(info.id, shape)) << info.id;
    EXPECT_TRUE(seen.insert(info.id).second) << "duplicate id " << info.id;
    EXPECT_NE(info.result, vigilSuccess) << info.id;
    EXPECT_GT(std::string(info.meaning).size(), 10u) << info.id;
    EXPECT_GT(std::string(info.remedy).size(), 10u) << info.id;
  }
}

TEST(ErrorTable, DocsListEveryIdWithItsResult) {
  std::ifstream file(VIGIL_SOURCE_DIR "/docs/errors.md");
  ASSERT_TRUE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  const std::string docs = text.str();
  std::set<std::string> documented;
  const std::regex heading("\n## (VG-[A-Z]+-[0-9]{3})\n");
  for (auto it = std::sregex_iterator(docs.begin(), docs.end(), heading); it != std::sregex_iterator(); ++it) {
    documented.insert((*it)[1]);
  }
  std::set<std::string> table;
  for (const ErrcInfo& info : allErrcInfo()) {
    table.insert(info.id);
    const std::string section = "## " + std::string(info.id) + "\n\n**Result:** `" + resultName(info.result) + "`";
    EXPECT_NE(docs.find(section), std::string::npos)
        << info.id << " is missing or has another result in docs/errors.md";
    for (const char* part : {"**Meaning:**", "**Cause:**", "**Remedy:**"}) {
      size_t at = docs.find(section);
      size_t next = docs.find("\n## ", at + 1);
      EXPECT_NE(docs.substr(at, next - at).find(part), std::string::npos) << info.id << " lacks " << part;
    }
  }
  EXPECT_EQ(documented, table);
}

TEST(ErrorBuilder, MessagesHaveOneShape) {
  Error e = ErrorBuilder(Errc::OpTimeout)
                .rank(0, 4)
                .comm("train")
                .op("allreduce", 42)
                .cause("timed out after 2.0 s; still receiving from rank 2")
                .build();
  EXPECT_EQ(e.result(), vigilTimeout);
  EXPECT_EQ(e.text(),
            "VG-OP-001: rank 0/4 (comm 'train'): allreduce seq 42: timed out after 2.0 s; still receiving from rank 2. "
            "Remedy: find the rank named as not progressing (stuck, stopped or in a different operation); raise "
            "VIGIL_TIMEOUT_MS only if the work is legitimately slow.");
  Error init = ErrorBuilder(Errc::ApiBadRank).op("init").cause("rank 5 of nranks 4 is out of range").build();
  EXPECT_EQ(init.text(),
            "VG-API-010: init: rank 5 of nranks 4 is out of range. Remedy: pass nranks >= 1 and 0 <= rank < nranks.");
  Error plain = ErrorBuilder(Errc::CommFinalized).build();
  EXPECT_EQ(plain.text(), std::string("VG-COMM-003: ") + errcInfo(Errc::CommFinalized).meaning +
                              ". Remedy: " + errcInfo(Errc::CommFinalized).remedy + ".");
}

TEST(ErrorBuilder, FieldsAreWhatTheTextShows) {
  Error e = ErrorBuilder(Errc::PeerLeft)
                .rank(0, 4)
                .comm("train")
                .op("allreduce", 7)
                .peer(3)
                .cause("rank 3 left the communicator")
                .build();
  EXPECT_STREQ(e.id(), "VG-PEER-002");
  EXPECT_EQ(e.result(), vigilRemoteError);
  EXPECT_EQ(e.rank(), 0);
  EXPECT_EQ(e.nranks(), 4);
  EXPECT_EQ(e.comm(), "train");
  EXPECT_EQ(e.op(), "allreduce");
  EXPECT_EQ(e.seq(), 7);
  EXPECT_EQ(e.peer(), 3);
  EXPECT_EQ(e.cause(), "rank 3 left the communicator.");
  EXPECT_EQ(e.remedy(), withFullStop(errcInfo(Errc::PeerLeft).remedy));
  EXPECT_EQ(e.head(), "VG-PEER-002: rank 0/4 (comm 'train'): allreduce seq 7: rank 3 left the communicator.");
  EXPECT_EQ(e.text(), e.head() + " Remedy: " + e.remedy());
  // No rank: no rank part and no comm; no op: no seq.
  Error bare = ErrorBuilder(Errc::Internal).comm("c").cause("x").build();
  EXPECT_EQ(bare.comm(), "");
  EXPECT_EQ(bare.seq(), -1);
  EXPECT_EQ(bare.text(), "VG-INT-001: x. Remedy: " + bare.remedy());
  // The shape the bindings use, from the same formatter: a rank without a count.
  EXPECT_EQ(errorText({"VG-API-017", 3, -1, "", "DeviceMesh", -1, "no dimension 'x'.", "use one."}),
            "VG-API-017: rank 3: DeviceMesh: no dimension 'x'. Remedy: use one.");
}

TEST(ErrorBuilder, ErrorsCrossTheWireAsFields) {
  const Error sent = ErrorBuilder(Errc::OpSizeMismatch)
                         .result(vigilMismatch)
                         .rank(2, 8)
                         .comm("moe")
                         .op("recv")
                         .peer(5)
                         .cause("rank 5 sent 8 bytes. Remedy: is quoted text, not a field")
                         .remedy("match the counts")
                         .build();
  WireWriter w;
  putError(w, sent);
  WireReader r(w.bytes());
  const Error got = getError(r);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(got.errc(), sent.errc());
  EXPECT_EQ(got.result(), vigilMismatch);
  EXPECT_EQ(got.rank(), 2);
  EXPECT_EQ(got.nranks(), 8);
  EXPECT_EQ(got.comm(), "moe");
  EXPECT_EQ(got.op(), "recv");
  EXPECT_EQ(got.seq(), -1);
  EXPECT_EQ(got.peer(), 5);
  EXPECT_EQ(got.cause(), sent.cause());
  EXPECT_EQ(got.remedy(), "match the counts.");
  EXPECT_EQ(got.text(), sent.text());
  // Untrusted bytes: an unknown id or a cut message is a format error.
  WireWriter unknown;
  unknown.putString("VG-XYZ-999");
  WireReader u(unknown.bytes());
  EXPECT_THROW(getError(u), WireFormatError);
  std::vector<uint8_t> cut = w.bytes();
  cut.resize(cut.size() - 3);
  WireReader c(cut);
  EXPECT_THROW(getError(c), WireFormatError);
}

TEST(ErrorBuilder, RankListsStayShort) {
  EXPECT_EQ(joinRanks({}), "");
  EXPECT_EQ(joinRanks({3}), "3");
  EXPECT_EQ(joinRanks({0, 1}), "0, 1");
  EXPECT_EQ(joinRanks({0, 1, 2, 3, 7, 9, 10, 11}), "0-3, 7, 9-11");
}

TEST(ErrorStrings, EveryResultHasText) {
  for (int r = 0; r <= vigilNumericError; ++r) {
    EXPECT_STRNE(vigilGetErrorString(static_cast<vigilResult_t>(r)), "unknown result code");
  }
  int version = 0;
  EXPECT_EQ(vigilGetVersion(&version), vigilSuccess);
  EXPECT_EQ(version, VIGIL_MAJOR * 10000 + VIGIL_MINOR * 100 + VIGIL_PATCH);
}

}  // namespace
}  // namespace vigil
