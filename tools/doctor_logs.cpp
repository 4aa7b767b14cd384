// `vigil-doctor logs FILE|DIR...`: reads the logs of a failed job (plain or gzip, one file per
// rank or host, or launcher output with every rank's lines prefixed), attributes each line to a
// rank and a host, matches it against the signature knowledge base, and reasons across ranks:
// the first failure in time, the ranks that only waited on it, the straggler behind a collective
// timeout, ports in use by host, ranks missing at init, ranks that exited early.

#include "doctor_logs.hpp"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "doctor_dump.hpp"

namespace vigil::doctor {
namespace {

namespace fs = std::filesystem;

constexpr size_t kTimeScan = 200;      // a line's timestamp is within its first characters
constexpr size_t kTextLimit = 240;     // evidence lines are cut here
constexpr size_t kRegexWindow = 4096;  // the part of a line a pattern is tried on

// What a line's launcher prefix and own fields say about where it comes from.
struct LineOrigin {
  std::optional<int> rank;
  std::string host;
};

bool digitAt(std::string_view s, size_t i) {
  return i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]));
}

// Reads N digits at i (advancing it); -1 if they are not there.
int digits(std::string_view s, size_t& i, size_t n) {
  int value = 0;
  for (size_t k = 0; k < n; ++k, ++i) {
    if (!digitAt(s, i)) return -1;
    value = value * 10 + (s[i] - '0');
  }
  return value;
}

// A run of digits at i (advancing it); -1 if none.
int64_t number(std::string_view s, size_t& i) {
  if (!digitAt(s, i)) return -1;
  int64_t value = 0;
  while (digitAt(s, i) && value < (int64_t{1} << 40)) value = value * 10 + (s[i++] - '0');
  return value;
}

int64_t daysFromCivil(int y, int m, int d) {
  y -= m <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return int64_t{era} * 146097 + doe - 719468;
}

}  // namespace

std::tuple<int, int, int> civilFromDays(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  return {static_cast<int>(yoe + era * 400 + (m <= 2)), m, d};
}

namespace {

std::optional<int64_t> civilMs(int y, int mo, int d, int64_t timeOfDayMs) {
  if (mo < 1 || mo > 12 || d < 1 || d > 31) return std::nullopt;
  return daysFromCivil(y, mo, d) * 86400000 + timeOfDayMs;
}

// Milliseconds of a fraction ".123456" or ",123" at i (advancing past it).
int fractionMs(std::string_view s, size_t& i) {
  if (i >= s.size() || (s[i] != '.' && s[i] != ',') || !digitAt(s, i + 1)) return 0;
  ++i;
  int ms = 0, n = 0;
  for (; digitAt(s, i); ++i, ++n)
    if (n < 3) ms = ms * 10 + (s[i] - '0');
  for (; n < 3; ++n) ms *= 10;
  return ms;
}

// "12:34:56" with an optional fraction at i (advancing past it), in milliseconds of the day.
std::optional<int64_t> timeOfDayMs(std::string_view s, size_t& i) {
  const int h = digits(s, i, 2);
  if (h < 0 || h > 23 || i >= s.size() || s[i++] != ':') return std::nullopt;
  const int mi = digits(s, i, 2);
  if (mi < 0 || mi > 59 || i >= s.size() || s[i++] != ':') return std::nullopt;
  const int sec = digits(s, i, 2);
  if (sec < 0 || sec > 60) return std::nullopt;
  return ((int64_t{h} * 60 + mi) * 60 + sec) * 1000 + fractionMs(s, i);
}

// The line's own time: "2024-05-01 12:34:56,789", "2024-05-01T12:34:56.789Z", "2024/05/01 ...",
// HCCL's plog "2024-05-01-12:34:56.789.123", torchrun's error summary "2024-05-01_12:34:56",
// vLLM's "INFO 05-01 12:34:56", or glog's "E0501 12:34:56.789012" (torch c10d
// writes "E501 ..."),
// whose year comes from yearHint.
std::optional<int64_t> lineTime(std::string_view s, int yearHint) {
  const size_t end = std::min(s.size(), kTimeScan);
  // vLLM's "(Worker pid=1) ERROR 10-11 11:32:59 [file.py:12]" is when the line was printed; a
  // full date later in the line (HCCL's error text quoted in it) is when the error happened.
  std::optional<int64_t> printed;
  for (size_t p = 0; p < end; ++p) {
    if (!printed && (p == 0 || s[p - 1] == ' ')) {
      for (const std::string_view level : {"DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL "}) {
        if (!s.substr(p).starts_with(level)) continue;
        size_t i = p + level.size();
        const int mo = digits(s, i, 2);
        if (mo < 0 || i >= s.size() || s[i++] != '-') break;
        const int d = digits(s, i, 2);
        if (d < 0 || i >= s.size() || s[i++] != ' ') break;
        if (const auto t = timeOfDayMs(s, i)) printed = civilMs(yearHint, mo, d, *t);
        break;
      }
    }
    if (digitAt(s, p) && (p == 0 || !digitAt(s, p - 1))) {
      size_t i = p;
      const int y = digits(s, i, 4);
      if (y < 1970 || i >= s.size() || (s[i] != '-' && s[i] != '/')) continue;
      const char sep = s[i++];
      const int mo = digits(s, i, 2);
      if (mo < 0 || i >= s.size() || s[i++] != sep) continue;
      const int d = digits(s, i, 2);
      if (d < 0 || i >= s.size() || (s[i] != ' ' && s[i] != 'T' && s[i] != '-' && s[i] != '_')) continue;
      ++i;
      if (const auto t = timeOfDayMs(s, i)) return civilMs(y, mo, d, *t);
    }
    const char c = s[p];
    if ((c == 'I' || c == 'W' || c == 'E' || c == 'F') && (p == 0 || s[p - 1] == '[')) {
      size_t i = p + 1;
      const size_t start = i;
      const int64_t monthDay = number(s, i);  // glog "0501"; torch's c10d "501" and "1016"
      if (monthDay < 0 || i - start < 3 || i - start > 4 || i >= s.size() || s[i++] != ' ') continue;
      const int mo = static_cast<int>(monthDay / 100), d = static_cast<int>(monthDay % 100);
      if (const auto t = timeOfDayMs(s, i)) return civilMs(yearHint, mo, d, *t);
    }
  }
  return printed;
}

// "[2025-..." : a bracketed date, as torch_npu writes after its "[pid] ".
bool datedBracket(std::string_view s) {
  size_t i = 1;
  return s.starts_with("[") && digits(s, i, 4) >= 0 && i < s.size() && s[i] == '-';
}

// Launcher prefixes, outermost first (they nest: srun around torchrun):
//   torchrun --tee / log_line_prefix "[default3]:" or "[rank3]:", mpirun --tag-output
//   "[1,3]<stderr>:", vigil-run "[3] ", srun --label "3: ". Returns the rank of the innermost and strips them.
std::optional<int> stripLauncherPrefix(std::string_view& s) {
  std::optional<int> rank;
  for (int round = 0; round < 3; ++round) {
    size_t i = 0;
    while (i < s.size() && i < 4 && s[i] == ' ') ++i;
    if (i < s.size() && s[i] == '[') {
      size_t j = i + 1;
      const std::string_view rest = s.substr(j);
      if (rest.starts_with("default") || rest.starts_with("rank")) {
        j += rest.starts_with("default") ? 7 : 4;
        const int64_t r = number(s, j);
        if (r >= 0 && j + 1 < s.size() && s[j] == ']' && s[j + 1] == ':') {
          rank = static_cast<int>(r);
          s.remove_prefix(j + 2);
          continue;
        }
      }
      j = i + 1;
      if (const int64_t r = number(s, j);
          r >= 0 && j + 1 < s.size() && s[j] == ']' && s[j + 1] == ' ' && !datedBracket(s.substr(j + 2))) {
        rank = static_cast<int>(r);  // vigil-run: "[3] "; torch_npu's "[pid] [2025-12-29 ..." is not a rank
        s.remove_prefix(j + 2);
        continue;
      }
      j = i + 1;
      if (number(s, j) >= 0 && j < s.size() && s[j] == ',') {
        ++j;
        const int64_t r = number(s, j);
        if (r >= 0 && s.substr(j).starts_with("]<")) {
          const size_t colon = s.find(">:", j);
          if (colon != std::string_view::npos && colon < j + 12) {
            rank = static_cast<int>(r);
            s.remove_prefix(colon + 2);
            continue;
          }
        }
      }
    }
    size_t j = i;
    const int64_t r = number(s, j);
    if (r >= 0 && j - i <= 5 && j + 1 < s.size() && s[j] == ':' && s[j + 1] == ' ') {
      rank = static_cast<int>(r);
      s.remove_prefix(j + 2);
      continue;
    }
    break;
  }
  return rank;
}

// NCCL's "host:pid:tid [dev] NCCL ..." prefix names the host.
std::string ncclHost(std::string_view s) {
  const size_t space = s.find(' ');
  if (space == std::string_view::npos || space == 0 || !s.substr(space + 1).starts_with("[")) return {};
  const std::string_view head = s.substr(0, space);
  const size_t c2 = head.rfind(':');
  if (c2 == std::string_view::npos || c2 == 0) return {};
  const size_t c1 = head.rfind(':', c2 - 1);
  if (c1 == std::string_view::npos || c1 == 0) return {};
  for (size_t k = c1 + 1; k < head.size(); ++k)
    if (k != c2 && !std::isdigit(static_cast<unsigned char>(head[k]))) return {};
  if (s.find("NCCL", space) == std::string_view::npos) return {};
  return std::string(head.substr(0, c1));
}

// vigil's own error lines: "VG-PEER-001: rank 2/8 ...". Returns the id and fills rank/nranks.
std::string vigilError(std::string_view s, std::optional<int>& rank, std::optional<int>& nranks) {
  for (size_t at = s.find("VG-"); at != std::string_view::npos; at = s.find("VG-", at + 3)) {
    size_t i = at + 3;
    while (i < s.size() && std::isupper(static_cast<unsigned char>(s[i]))) ++i;
    if (i == at + 3 || i >= s.size() || s[i++] != '-') continue;
    if (digits(s, i, 3) < 0 || !s.substr(i).starts_with(": rank ")) continue;
    const std::string id(s.substr(at, i - at));
    i += 7;
    const int64_t r = number(s, i);
    if (r < 0 || i >= s.size() || s[i++] != '/') continue;
    const int64_t n = number(s, i);
    if (n <= 0) continue;
    rank = static_cast<int>(r);
    nranks = static_cast<int>(n);
    return id;
  }
  return {};
}

// The rank and host a file's name gives: "rank3.log", "worker-3.err", "node1-rank3.log.gz",
// torchrun's "<log_dir>/<run>/attempt_0/3/stderr.log" (local rank), "node1/..." (host).
void originFromName(LogFile& file) {
  static const std::regex rankRe("(?:^|[^a-z])(?:rank|worker|proc|process)[_.-]?([0-9]+)", std::regex::icase);
  static const std::regex hostRe("(?:^|[^A-Za-z0-9])((?:node|host)[_-]?[A-Za-z0-9]+?)(?=[._/-]|$)", std::regex::icase);
  const fs::path path(file.path);
  const std::string base = path.filename().string(), parent = path.parent_path().filename().string();
  std::smatch m;
  if (std::regex_search(base, m, rankRe)) {
    file.rank = std::stoi(m[1]);
  } else if ((base == "stdout.log" || base == "stderr.log" || base == "error.json") && !parent.empty() &&
             std::all_of(parent.begin(), parent.end(), [](unsigned char c) { return std::isdigit(c); })) {
    file.rank = std::stoi(parent);
  }
  const std::string named = path.parent_path().string() + "/" + base;
  if (std::regex_search(named, m, hostRe)) file.host = m[1];
}

struct Reader {
  gzFile gz = nullptr;
  explicit Reader(const std::string& path) : gz(gzopen(path.c_str(), "rb")) {
    if (gz) gzbuffer(gz, 1 << 17);
  }
  ~Reader() {
    if (gz) gzclose(gz);
  }
  // One line without its end; false at the end. gzopen reads plain files as they are.
  bool next(std::string& line) {
    line.clear();
    char buf[8192];
    while (gzgets(gz, buf, sizeof buf)) {
      line += buf;
      if (!line.empty() && line.back() == '\n') {
        line.pop_back();
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return true;
      }
    }
    return !line.empty();
  }
};

bool looksBinary(const std::string& path) {
  Reader reader(path);
  if (!reader.gz) return false;
  char buf[4096];
  const int n = gzread(reader.gz, buf, sizeof buf);
  return n > 0 && std::memchr(buf, '\0', static_cast<size_t>(n)) != nullptr;
}

// A file met in a directory walk that is a document or an image, not a log: a bug report's
// README.md next to its logs, an earlier --html report, a screenshot.
bool notALog(const fs::path& path) {
  static const std::set<std::string> kNotLogs = {".md",   ".html", ".htm", ".png", ".jpg",
                                                 ".jpeg", ".gif",  ".svg", ".pdf"};
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return kNotLogs.contains(ext);
}

std::vector<std::string> expandInputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<std::string> found;
      size_t notLogs = 0;
      for (auto it = fs::recursive_directory_iterator(input, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        if (notALog(it->path())) {
          ++notLogs;
        } else {
          found.push_back(it->path().string());
        }
      }
      if (ec) throw InputError(input + ": cannot list: " + ec.message());
      if (notLogs > 0)
        std::cerr << "vigil-doctor: " << input << ": skipped " << notLogs
                  << " file(s) that are documents or images, not logs (*.md, *.html, *.png, ...); name a file to "
                     "read it anyway\n";
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(input, ec)) {
      files.push_back(input);
    } else {
      throw InputError(input + ": no such file or directory");
    }
  }
  return files;
}

std::string cut(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  if (text.size() <= kTextLimit) return std::string(text);
  return std::string(text.substr(0, kTextLimit)) + " ...";
}

void scanFile(const KnowledgeBase& kb, const std::map<std::string, std::string>& meanings, size_t index, LogScan& scan,
              int& yearHint) {
  LogFile& file = scan.files[index];
  Reader reader(file.path);
  if (!reader.gz) throw InputError(file.path + ": cannot open");
  std::vector<size_t> fileHits;
  std::set<int> lineRanks, fieldRanks;
  std::set<std::string> lineHosts;
  std::optional<int64_t> lastTime;
  std::optional<int> entryRank;  // the rank an entry of a launcher's report names (Scope::Entry)
  bool firstEntry = false;       // inside the entry the launcher names as the first failure
  std::string raw;
  for (size_t lineNo = 1; reader.next(raw); ++lineNo) {
    ++file.lines;
    std::string_view s(raw);
    // An entry of torchrun's report: "[0]:", then indented "  rank : 1 (local_rank: 1)" lines.
    const bool indented = !s.empty() && (s.front() == ' ' || s.front() == '\t');
    if (!indented) {
      entryRank.reset();
      size_t i = 1;
      if (!(s.starts_with("[") && number(s, i) >= 0 && s.substr(i) == "]:")) firstEntry = false;
    }
    LineOrigin origin;
    origin.rank = stripLauncherPrefix(s);
    if (origin.rank) lineRanks.insert(*origin.rank);
    origin.host = ncclHost(s);
    if (auto t = lineTime(s, yearHint)) {
      lastTime = t;
      if (*t > 0) yearHint = std::max(yearHint, 1970 + static_cast<int>(*t / 31556952000));
    }
    if (origin.rank) scan.ranksWithLines.insert(*origin.rank);

    Hit hit;
    std::smatch m;
    std::string window;
    for (const Signature& sig : kb.signatures) {
      const size_t at = s.find(sig.needle);
      if (at == std::string_view::npos) continue;
      // std::regex recurses per character: a long line (a tensor printed whole) is searched
      // in a window around the needle.
      const size_t from = s.size() <= kRegexWindow ? 0 : at - std::min(at, kRegexWindow / 2);
      window.assign(s.substr(from, kRegexWindow));
      if (!std::regex_search(window, m, sig.re)) continue;
      hit.sig = &sig;
      for (const auto& [name, group] : sig.fields)
        if (m[group].matched && m[group].length() > 0) hit.fields[name] = m[group].str();
      break;
    }
    std::optional<int> vgRank, vgRanks;
    const std::string vgId = vigilError(s, vgRank, vgRanks);
    if (!hit.sig && !vgId.empty()) {
      // A vigil error the knowledge base has no entry for: its meaning comes from docs/errors.md,
      // its remedy from the line itself.
      auto it = std::find_if(scan.synthesized.begin(), scan.synthesized.end(),
                             [&](const Signature& sig) { return sig.vigil == vgId; });
      if (it == scan.synthesized.end()) {
        Signature sig;
        sig.id = "vigil-" + vgId;
        sig.system = "vigil";
        sig.role = "cause";
        sig.vigil = vgId;
        const auto meaning = meanings.find(vgId);
        sig.title = "vigil " + vgId + (meaning == meanings.end() ? "" : ": " + meaning->second);
        sig.meaning = meaning == meanings.end() ? "vigil error " + vgId : meaning->second;
        sig.remedy = "the line's own Remedy; `vigil-doctor explain " + vgId + "` gives the long form";
        sig.source = "vigil:docs/errors.md";
        scan.synthesized.push_back(std::move(sig));
        it = std::prev(scan.synthesized.end());
      }
      hit.sig = &*it;
    }
    if (vgRanks) scan.nranks = std::max(scan.nranks.value_or(0), *vgRanks);
    if (!hit.sig) continue;

    hit.file = index;
    hit.line = lineNo;
    hit.timeMs = lastTime;
    if (auto f = hit.fields.find("rank"); f != hit.fields.end()) {
      try {
        hit.rank = std::stoi(f->second);
        fieldRanks.insert(*hit.rank);
      } catch (const std::exception&) {
      }
    }
    if (!hit.rank) hit.rank = vgRank ? vgRank : origin.rank;
    if (!hit.rank && indented) hit.rank = entryRank;
    hit.namedFirst = firstEntry && indented;
    if (hit.sig->scope == Signature::Scope::Entry && hit.rank) entryRank = hit.rank;
    if (hit.sig->scope == Signature::Scope::FirstEntry) firstEntry = true;
    if (auto f = hit.fields.find("host"); f != hit.fields.end()) hit.host = f->second;
    if (hit.host.empty()) hit.host = origin.host;
    if (auto f = hit.fields.find("nranks"); f != hit.fields.end()) {
      try {
        scan.nranks = std::max(scan.nranks.value_or(0), std::stoi(f->second));
      } catch (const std::exception&) {
      }
    }
    hit.text = cut(s);
    fileHits.push_back(scan.hits.size());
    scan.hits.push_back(std::move(hit));
    if (!origin.host.empty()) lineHosts.insert(origin.host);
  }
  file.mixedRanks = lineRanks.size() > 1;
  // A file whose lines name one host (NCCL's prefix) is that host's, unless its name says otherwise.
  if (file.host.empty() && lineHosts.size() == 1) file.host = *lineHosts.begin();
  // A file without per-line prefixes belongs to the one rank its name or its lines name.
  if (!file.rank && lineRanks.empty() && fieldRanks.size() == 1) file.rank = *fieldRanks.begin();
  if (!file.rank && lineRanks.size() == 1 && !file.mixedRanks) file.rank = *lineRanks.begin();
  if (file.rank && !file.mixedRanks) scan.ranksWithLines.insert(*file.rank);
  for (const size_t h : fileHits) {
    Hit& hit = scan.hits[h];
    if (!hit.rank && !file.mixedRanks) hit.rank = file.rank;
    if (hit.host.empty()) hit.host = file.host;
    if (hit.rank) scan.ranksWithLines.insert(*hit.rank);
    if (hit.rank && !hit.host.empty()) scan.hostOfRank.emplace(*hit.rank, hit.host);
    if (!hit.host.empty()) scan.hosts.insert(hit.host);
  }
  if (!file.host.empty()) scan.hosts.insert(file.host);
  if (file.rank && !file.host.empty()) scan.hostOfRank.emplace(*file.rank, file.host);
}

}  // namespace

LogScan scanLogs(const KnowledgeBase& kb, const std::vector<std::string>& inputs) {
  LogScan scan;
  scan.vigilMeanings = vigilErrorMeanings();
  int yearHint = 0;  // year 0: unknown (glog lines carry none); shown as "MM-DD ..."
  for (const std::string& path : expandInputs(inputs)) {
    if (looksBinary(path)) {
      std::cerr << "vigil-doctor: " << path << ": skipped (not text)\n";
      continue;
    }
    LogFile file;
    file.path = path;
    originFromName(file);
    scan.files.push_back(std::move(file));
    scanFile(kb, scan.vigilMeanings, scan.files.size() - 1, scan, yearHint);
    scan.lines += scan.files.back().lines;
  }
  // Lines without a year (glog, vLLM) met before any line with one were timed in year 0: they
  // take the year the logs state, so that they order with the dated lines.
  if (yearHint > 0)
    for (Hit& hit : scan.hits)
      if (hit.timeMs && *hit.timeMs < 0) {
        const int64_t days = (*hit.timeMs - 86399999) / 86400000;
        const auto [y, m, d] = civilFromDays(days);
        if (y == 0) hit.timeMs = civilMs(yearHint, m, d, *hit.timeMs - days * 86400000);
      }
  return scan;
}

}  // namespace vigil::doctor
