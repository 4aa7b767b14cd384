// The error table is the single source of ids; docs/errors.md must document
// exactly those ids with the same result codes, and messages have one shape.

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "core/errors.hpp"
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
