#include "core/errors.hpp"

#include <cstring>

namespace vigil {
namespace {

constexpr ErrcInfo kErrcTable[] = {
#define VIGIL_ERROR(symbol, id, result, meaning, remedy) {Errc::symbol, id, result, meaning, remedy},
#include "core/error_ids.def"
#undef VIGIL_ERROR
};

}  // namespace

const ErrcInfo& errcInfo(Errc errc) {
  return kErrcTable[static_cast<size_t>(errc)];
}

std::span<const ErrcInfo> allErrcInfo() {
  return kErrcTable;
}

std::optional<Errc> errcOfId(std::string_view id) {
  for (const ErrcInfo& info : kErrcTable) {
    if (id == info.id) return info.errc;
  }
  return std::nullopt;
}

ErrorBuilder ErrorBuilder::from(const Error& e) {
  ErrorBuilder b(e.errc());
  b.result_ = e.result();
  b.rank_ = e.rank();
  b.nranks_ = e.nranks();
  b.comm_ = e.comm();
  b.op_ = e.op();
  b.seq_ = e.seq();
  b.peer_ = e.peer();
  b.cause_ = e.cause();
  b.remedy_ = e.remedy();
  return b;
}

Error ErrorBuilder::build() const {
  const ErrcInfo& info = errcInfo(errc_);
  Error e;
  e.errc_ = errc_;
  e.result_ = result_;
  e.rank_ = rank_;
  e.nranks_ = rank_ >= 0 ? nranks_ : -1;
  e.comm_ = rank_ >= 0 ? comm_ : std::string();  // the text names a comm only with a rank
  e.op_ = op_;
  e.seq_ = op_.empty() ? -1 : seq_;
  e.peer_ = peer_;
  e.cause_ = withFullStop(cause_.empty() ? std::string_view(info.meaning) : std::string_view(cause_));
  e.remedy_ = withFullStop(remedy_.empty() ? std::string_view(info.remedy) : std::string_view(remedy_));
  e.text_ = errorText(e.parts());
  return e;
}

std::string errnoText(int err) {
  char buf[128];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* text = strerror_r(err, buf, sizeof buf);
  return cat(text, " (errno ", err, ")");
}

std::string joinRanks(const std::vector<int>& ranks) {
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    if (j >= i + 2) {
      out += cat(ranks[i], "-", ranks[j]);
    } else {
      out += std::to_string(ranks[i]);
      if (j == i + 1) out += cat(", ", ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace vigil
