#pragma once
// Every failure in vigil is an Error with a stable id from error_ids.def.
// Messages are built here and nowhere else, in one shape:
//   "VG-PEER-001: rank 0/4 (comm 'c7f3'): allreduce seq 42: <cause>. Remedy: <what to do>"

#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <string_view>

#include "core/strcat.hpp"
#include "vigil/vigil.h"

namespace vigil {

enum class Errc : uint16_t {
#define VIGIL_ERROR(symbol, id, result, meaning, remedy) symbol,
#include "core/error_ids.def"
#undef VIGIL_ERROR
};

struct ErrcInfo {
  Errc errc;
  const char* id;
  vigilResult_t result;
  const char* meaning;
  const char* remedy;
};

const ErrcInfo& errcInfo(Errc errc);
std::span<const ErrcInfo> allErrcInfo();

class Error : public std::exception {
 public:
  Error(Errc errc, vigilResult_t result, std::string text) : errc_(errc), result_(result), text_(std::move(text)) {}
  Errc errc() const { return errc_; }
  vigilResult_t result() const { return result_; }
  const std::string& text() const { return text_; }
  const char* what() const noexcept override { return text_.c_str(); }

 private:
  Errc errc_;
  vigilResult_t result_;
  std::string text_;
};

// Fills in the facts of one error; build() or raise() turns them into text.
class ErrorBuilder {
 public:
  explicit ErrorBuilder(Errc errc) : errc_(errc), result_(errcInfo(errc).result) {}

  ErrorBuilder& rank(int rank, int nranks) {
    rank_ = rank;
    nranks_ = nranks;
    return *this;
  }
  ErrorBuilder& comm(std::string_view name) {
    comm_ = name;
    return *this;
  }
  ErrorBuilder& op(std::string_view name, int64_t seq = -1) {
    op_ = name;
    seq_ = seq;
    return *this;
  }
  template <class... Parts>
  ErrorBuilder& cause(const Parts&... parts) {
    cause_ = cat(parts...);
    return *this;
  }
  // Replaces the table's generic remedy with a more specific one.
  template <class... Parts>
  ErrorBuilder& remedy(const Parts&... parts) {
    remedy_ = cat(parts...);
    return *this;
  }
  // For errors relayed from a peer, which keep the peer's result code.
  ErrorBuilder& result(vigilResult_t result) {
    result_ = result;
    return *this;
  }

  Error build() const;
  [[noreturn]] void raise() const { throw build(); }

 private:
  Errc errc_;
  vigilResult_t result_;
  int rank_ = -1;
  int nranks_ = -1;
  std::string comm_;
  std::string op_;
  int64_t seq_ = -1;
  std::string cause_;
  std::string remedy_;
};

// "VG-OP-002" etc. for an Errc.
inline const char* errorId(Errc errc) {
  return errcInfo(errc).id;
}

// Text for an errno value.
std::string errnoText(int err);

}  // namespace vigil
