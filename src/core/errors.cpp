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

Error ErrorBuilder::build() const {
  const ErrcInfo& info = errcInfo(errc_);
  std::string text = info.id;
  text += ": ";
  if (rank_ >= 0) {
    text += cat("rank ", rank_, "/", nranks_);
    if (!comm_.empty()) text += cat(" (comm '", comm_, "')");
    text += ": ";
  }
  if (!op_.empty()) {
    text += op_;
    if (seq_ >= 0) text += cat(" seq ", seq_);
    text += ": ";
  }
  text += cause_.empty() ? std::string(info.meaning) : cause_;
  if (!text.empty() && text.back() != '.') text += '.';
  text += " Remedy: ";
  text += remedy_.empty() ? std::string(info.remedy) : remedy_;
  if (text.back() != '.') text += '.';
  return Error(errc_, result_, std::move(text));
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
