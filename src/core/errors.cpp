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
  b.f_ = e.f_;
  return b;
}

Error ErrorBuilder::build() const {
  const ErrcInfo& info = errcInfo(f_.errc);
  Error e;
  e.f_ = f_;
  if (f_.rank < 0) {  // the text names a size and a comm only with a rank
    e.f_.nranks = -1;
    e.f_.comm.clear();
  }
  if (f_.op.empty()) e.f_.seq = -1;
  e.f_.cause = withFullStop(f_.cause.empty() ? std::string_view(info.meaning) : std::string_view(f_.cause));
  e.f_.remedy = withFullStop(f_.remedy.empty() ? std::string_view(info.remedy) : std::string_view(f_.remedy));
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
