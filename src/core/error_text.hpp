#pragma once
// The one shape of every vigil error message, built from an error's fields:
//
//   "VG-PEER-001: rank 0/4 (comm 'c7f3'): allreduce seq 42: <cause>. Remedy: <remedy>."
//
// Every part between the id and the cause is optional: no rank part when
// rank < 0 ("/n" only when nranks >= 0, the comm only when named), no op part
// when op is empty (" seq N" only when seq >= 0). Cause and remedy end with a
// full stop (withFullStop adds one).
//
// Header-only and free of the library's internals: the Python and torch
// bindings, which reach the library only through its C API, build the text
// of their own refusals with it too.

#include <cstdint>
#include <string>
#include <string_view>

namespace vigil {

struct ErrorTextParts {
  std::string_view id;
  int rank = -1;
  int nranks = -1;
  std::string_view comm;
  std::string_view op;
  int64_t seq = -1;
  std::string_view cause;   // with its full stop
  std::string_view remedy;  // with its full stop
};

inline std::string withFullStop(std::string_view sentence) {
  std::string out(sentence);
  if (out.empty() || out.back() != '.') out += '.';
  return out;
}

// Everything before " Remedy: ": how an error that quotes another one cites
// it (the quoting error gives the remedy once, at its end).
inline std::string errorHead(const ErrorTextParts& p) {
  std::string text(p.id);
  text += ": ";
  if (p.rank >= 0) {
    text += "rank ";
    text += std::to_string(p.rank);
    if (p.nranks >= 0) {
      text += '/';
      text += std::to_string(p.nranks);
    }
    if (!p.comm.empty()) {
      text += " (comm '";
      text += p.comm;
      text += "')";
    }
    text += ": ";
  }
  if (!p.op.empty()) {
    text += p.op;
    if (p.seq >= 0) {
      text += " seq ";
      text += std::to_string(p.seq);
    }
    text += ": ";
  }
  text += p.cause;
  return text;
}

inline std::string errorText(const ErrorTextParts& p) {
  std::string text = errorHead(p);
  text += " Remedy: ";
  text += p.remedy;
  return text;
}

}  // namespace vigil
