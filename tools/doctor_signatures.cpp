// The log-signature knowledge base of `vigil-doctor logs`: loading tools/log_signatures.json,
// and `vigil-doctor logs --check-signatures`, which proves every entry against its own sample
// lines and against every other entry's samples.

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "doctor_dump.hpp"
#include "doctor_logs.hpp"

namespace vigil::doctor {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::set<std::string> kSystems = {"nccl",  "hccl",     "torch",    "gloo", "mpi",
                                        "vigil", "launcher", "megatron", "vllm"};
const std::set<std::string> kRoles = {"cause", "symptom", "context"};
const std::set<std::string> kFields = {"rank",    "nranks", "peer",       "host",      "peer_host",  "port",
                                       "op",      "seq",    "timeout_ms", "timeout_s", "elapsed_ms", "expected",
                                       "arrived", "code",   "iteration",  "pid",       "size",       "device",
                                       "signal",  "numel",  "resource",   "reason"};

fs::path executableDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return fs::current_path();
  return fs::path(std::string(buf, static_cast<size_t>(n))).parent_path();
}

std::string text(const json& entry, const char* key, const std::string& where, bool required = true) {
  const auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) {
    if (required) throw InputError(where + ": missing \"" + key + "\"");
    return {};
  }
  if (!it->is_string() || (required && it->get<std::string>().empty()))
    throw InputError(where + ": \"" + key + "\" must be a non-empty string");
  return it->get<std::string>();
}

std::vector<std::string> texts(const json& entry, const char* key, const std::string& where) {
  const auto it = entry.find(key);
  if (it == entry.end() || !it->is_array() || it->empty())
    throw InputError(where + ": \"" + key + "\" must be a non-empty list of strings");
  std::vector<std::string> out;
  for (const json& item : *it) {
    if (!item.is_string() || item.get<std::string>().empty())
      throw InputError(where + ": \"" + key + "\" holds something other than a non-empty string");
    out.push_back(item.get<std::string>());
  }
  return out;
}

Signature parseSignature(const json& entry, const std::string& where) {
  if (!entry.is_object()) throw InputError(where + ": not an object");
  Signature sig;
  sig.id = text(entry, "id", where);
  const std::string at = where + " ('" + sig.id + "')";
  sig.system = text(entry, "system", at);
  if (!kSystems.contains(sig.system)) throw InputError(at + ": unknown system '" + sig.system + "'");
  sig.role = text(entry, "role", at);
  if (!kRoles.contains(sig.role)) throw InputError(at + ": role must be cause, symptom or context");
  sig.needle = text(entry, "needle", at);
  sig.pattern = text(entry, "pattern", at);
  try {
    sig.re = std::regex(sig.pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    throw InputError(at + ": the pattern does not compile as an ECMAScript regex: " + e.what());
  }
  const auto fields = entry.find("fields");
  if (fields != entry.end() && !fields->is_null()) {
    if (!fields->is_object()) throw InputError(at + ": \"fields\" must map names to group numbers");
    for (const auto& [name, group] : fields->items()) {
      if (!kFields.contains(name)) throw InputError(at + ": unknown field '" + name + "'");
      if (!group.is_number_integer() || group.get<int>() < 1 ||
          static_cast<size_t>(group.get<int>()) > sig.re.mark_count())
        throw InputError(at + ": field '" + name + "' names no capture group of the pattern");
      sig.fields.emplace_back(name, group.get<int>());
    }
  }
  sig.title = text(entry, "title", at);
  sig.meaning = text(entry, "meaning", at);
  sig.causes = texts(entry, "causes", at);
  sig.remedy = text(entry, "remedy", at);
  sig.vigil = text(entry, "vigil", at, false);
  sig.source = text(entry, "source", at);
  if (!sig.source.starts_with("https://") && !sig.source.starts_with("http://") && !sig.source.starts_with("vigil:"))
    throw InputError(at + ": \"source\" must be the public address the wording was taken from");
  sig.samples = texts(entry, "samples", at);
  const std::string scope = text(entry, "scope", at, false);
  if (scope == "entry") {
    sig.scope = Signature::Scope::Entry;
  } else if (scope == "first-entry") {
    sig.scope = Signature::Scope::FirstEntry;
  } else if (!scope.empty() && scope != "line") {
    throw InputError(at + ": \"scope\" must be line, entry or first-entry");
  }
  return sig;
}

// A sample "matches" a signature as a log line would: it holds the needle and the pattern is found.
bool matches(const Signature& sig, const std::string& line, std::smatch& m) {
  return line.find(sig.needle) != std::string::npos && std::regex_search(line, m, sig.re);
}

}  // namespace

std::vector<std::string> dataFileCandidates(const char* envVar, const std::string& installRel,
                                            const std::string& sourceRel) {
  std::vector<fs::path> candidates;
  if (const char* dir = envVar ? std::getenv(envVar) : nullptr; dir && *dir)
    candidates.push_back(fs::path(dir) / fs::path(sourceRel).filename());
  const fs::path exe = executableDir();
  candidates.push_back(exe / ".." / installRel);
  candidates.push_back(exe / ".." / sourceRel);     // build/ under the source tree
  candidates.push_back(exe / "../.." / sourceRel);  // build/tools/
  std::vector<std::string> out;
  for (const fs::path& path : candidates) {
    const std::string normal = path.lexically_normal().string();
    if (std::find(out.begin(), out.end(), normal) == out.end()) out.push_back(normal);
  }
  return out;
}

std::map<std::string, std::string> vigilErrorMeanings() {
  std::map<std::string, std::string> meanings;
  for (const std::string& path : dataFileCandidates("VIGIL_DOCS_DIR", "share/doc/vigil/errors.md", "docs/errors.md")) {
    std::ifstream in(path);
    if (!in) continue;
    // Table rows: | [VG-OP-001](#vg-op-001) | `vigilTimeout` | meaning |
    for (std::string line; std::getline(in, line);) {
      if (!line.starts_with("| [VG-")) continue;
      const size_t close = line.find(']');
      const size_t last = line.rfind(" |");
      const size_t prev = last == std::string::npos ? std::string::npos : line.rfind("| ", last - 1);
      if (close == std::string::npos || prev == std::string::npos || prev + 2 > last) continue;
      meanings[line.substr(3, close - 3)] = line.substr(prev + 2, last - prev - 2);
    }
    break;
  }
  return meanings;
}

std::string KnowledgeBase::locate(const std::string& explicitPath) {
  if (!explicitPath.empty()) return explicitPath;
  if (const char* path = std::getenv("VIGIL_SIGNATURES"); path && *path) return path;
  const std::vector<std::string> candidates =
      dataFileCandidates(nullptr, "share/vigil/log_signatures.json", "tools/log_signatures.json");
  for (const std::string& path : candidates)
    if (fs::is_regular_file(path)) return path;
  std::string tried;
  for (const std::string& path : candidates) tried += "\n  " + path;
  throw InputError("cannot find the signature knowledge base log_signatures.json; looked in:" + tried +
                   "\npass --signatures PATH or set VIGIL_SIGNATURES to the file");
}

KnowledgeBase KnowledgeBase::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error& e) {
    throw InputError(path + ": not JSON: " + e.what());
  }
  if (!doc.is_array()) throw InputError(path + ": the knowledge base must be a JSON array of signatures");
  KnowledgeBase kb;
  kb.path = path;
  std::set<std::string> ids;
  for (size_t i = 0; i < doc.size(); ++i) {
    Signature sig = parseSignature(doc[i], path + ": entry " + std::to_string(i));
    if (!ids.insert(sig.id).second)
      throw InputError(path + ": entry " + std::to_string(i) + ": duplicate id '" + sig.id + "'");
    kb.signatures.push_back(std::move(sig));
  }
  return kb;
}

int runCheckSignatures(const std::string& explicitPath, size_t minimum) {
  KnowledgeBase kb;
  try {
    kb = KnowledgeBase::load(KnowledgeBase::locate(explicitPath));
  } catch (const InputError& e) {
    std::cerr << "vigil-doctor: " << e.what() << "\n";
    return 1;
  }
  size_t failures = 0, samples = 0;
  std::map<std::string, size_t> perSystem;
  const auto fail = [&](const Signature& sig, const std::string& what) {
    std::cout << "FAIL " << sig.id << ": " << what << "\n";
    ++failures;
  };
  for (const Signature& sig : kb.signatures) {
    ++perSystem[sig.system];
    // A field may be optional in the format (torch's watchdog line has NumelIn in some versions
    // only): each one must be extracted from at least one sample.
    std::set<std::string> filled;
    for (const std::string& sample : sig.samples) {
      ++samples;
      std::smatch m;
      if (sample.find(sig.needle) == std::string::npos) {
        fail(sig, "the sample does not hold the needle \"" + sig.needle + "\": " + sample);
        continue;
      }
      if (!std::regex_search(sample, m, sig.re)) {
        fail(sig, "the pattern does not match its sample: " + sample);
        continue;
      }
      for (const auto& [name, group] : sig.fields)
        if (m[group].matched && m[group].length() > 0) filled.insert(name);
    }
    for (const auto& [name, group] : sig.fields)
      if (!filled.contains(name))
        fail(sig, "field '" + name + "' (group " + std::to_string(group) + ") is empty on every sample");
    for (const Signature& other : kb.signatures) {
      if (&other == &sig) continue;
      for (const std::string& sample : other.samples) {
        std::smatch m;
        if (matches(sig, sample, m)) fail(sig, "also matches a sample of '" + other.id + "': " + sample);
      }
    }
  }
  std::cout << kb.path << ": " << kb.signatures.size() << " signatures (";
  bool first = true;
  for (const auto& [system, count] : perSystem) {
    std::cout << (first ? "" : ", ") << system << " " << count;
    first = false;
  }
  std::cout << "), " << samples << " sample lines\n";
  if (kb.signatures.size() < minimum) {
    std::cout << "FAIL: " << kb.signatures.size() << " signatures, fewer than the " << minimum << " required\n";
    ++failures;
  }
  std::cout << (failures == 0 ? "signatures: all samples match their own signature and no other\n"
                              : "signatures: " + std::to_string(failures) + " problem(s)\n");
  return failures == 0 ? 0 : 1;
}

}  // namespace vigil::doctor
