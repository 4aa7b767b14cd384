#pragma once
// Every failure in vigil is an Error with a stable id from error_ids.def and
// the facts of the failure as fields: this rank, the communicator, the
// operation and its sequence number, the peer involved, the cause and the
// remedy. The text is made from the fields in one place (core/error_text.hpp),
// in one shape:
//   "VG-PEER-001: rank 0/4 (comm 'c7f3'): allreduce seq 42: <cause>. Remedy: <what to do>"
// Errors cross rank boundaries as fields too (net/wire.hpp: putError/getError).

#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/error_text.hpp"
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
// The Errc of a stable id ("VG-OP-002"); nothing for an id this build does not have.
std::optional<Errc> errcOfId(std::string_view id);

class ErrorBuilder;

// The facts of one error, as ErrorBuilder collects them and Error keeps them.
struct ErrorFacts {
  Errc errc = Errc::Internal;
  vigilResult_t result = vigilInternalError;
  int rank = -1;    // -1: none (e.g. the rendezvous root)
  int nranks = -1;  // -1: none
  std::string comm;
  std::string op;
  int64_t seq = -1;  // -1: none
  int peer = -1;     // -1: none
  std::string cause;
  std::string remedy;
};

// Built by ErrorBuilder. Cause and remedy are final: the table's text where
// the raiser gave none, each ending with a full stop, as the text shows them.
class Error : public std::exception {
 public:
  Errc errc() const { return f_.errc; }
  const char* id() const { return errcInfo(f_.errc).id; }
  vigilResult_t result() const { return f_.result; }
  int rank() const { return f_.rank; }
  int nranks() const { return f_.nranks; }
  const std::string& comm() const { return f_.comm; }
  const std::string& op() const { return f_.op; }
  int64_t seq() const { return f_.seq; }
  int peer() const { return f_.peer; }
  const std::string& cause() const { return f_.cause; }
  const std::string& remedy() const { return f_.remedy; }

  const std::string& text() const { return text_; }
  const char* what() const noexcept override { return text_.c_str(); }
  // The text without its remedy: how another error quotes this one.
  std::string head() const { return errorHead(parts()); }

 private:
  friend class ErrorBuilder;
  Error() = default;
  ErrorTextParts parts() const { return {id(), f_.rank, f_.nranks, f_.comm, f_.op, f_.seq, f_.cause, f_.remedy}; }

  ErrorFacts f_;
  std::string text_;
};

// Fills in the facts of one error; build() or raise() turns them into an Error.
class ErrorBuilder {
 public:
  explicit ErrorBuilder(Errc errc) {
    f_.errc = errc;
    f_.result = errcInfo(errc).result;
  }
  // Starts from the fields of an existing error (to add this rank, say).
  static ErrorBuilder from(const Error& e);

  ErrorBuilder& rank(int rank, int nranks) {
    f_.rank = rank;
    f_.nranks = nranks;
    return *this;
  }
  ErrorBuilder& comm(std::string_view name) {
    f_.comm = name;
    return *this;
  }
  ErrorBuilder& op(std::string_view name, int64_t seq = -1) {
    f_.op = name;
    f_.seq = seq;
    return *this;
  }
  // The peer rank the error is about (one that died, left, failed or sent
  // something unexpected); not part of the text, whose cause names it.
  ErrorBuilder& peer(int rank) {
    f_.peer = rank;
    return *this;
  }
  template <class... Parts>
  ErrorBuilder& cause(const Parts&... parts) {
    f_.cause = cat(parts...);
    return *this;
  }
  // Replaces the table's generic remedy with a more specific one.
  template <class... Parts>
  ErrorBuilder& remedy(const Parts&... parts) {
    f_.remedy = cat(parts...);
    return *this;
  }
  // For errors relayed from a peer, which keep the peer's result code.
  ErrorBuilder& result(vigilResult_t result) {
    f_.result = result;
    return *this;
  }

  Error build() const;
  [[noreturn]] void raise() const { throw build(); }

 private:
  ErrorFacts f_;
};

// "VG-OP-002" etc. for an Errc.
inline const char* errorId(Errc errc) {
  return errcInfo(errc).id;
}

// Text for an errno value.
std::string errnoText(int err);

}  // namespace vigil
