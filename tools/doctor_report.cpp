// `vigil-doctor logs --json` and `--html`: the same verdict as the text report, for programs
// (one JSON document on stdout) and for people (one self-contained HTML file: no server, no
// network; a timeline of the ranks drawn as inline SVG with the first failure highlighted).

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "doctor_dump.hpp"
#include "doctor_logs.hpp"

namespace vigil::doctor {
namespace {

using nlohmann::json;

constexpr size_t kMaxJsonHits = 20000;  // a program wanting more reads the logs itself
constexpr size_t kMaxMarks = 5000;      // markers on the timeline
constexpr size_t kMarksPerRow = 40;     // per rank and signature
constexpr size_t kMaxRows = 512;
constexpr int kLeft = 120, kPlot = 780, kUntimed = 70, kRow = 22, kTop = 30;

json optionalRank(const std::optional<int>& rank) {
  return rank ? json(*rank) : json(nullptr);
}

json hitJson(const LogScan& scan, const Hit& hit) {
  json j = {{"file", scan.files[hit.file].path},
            {"line", hit.line},
            {"rank", optionalRank(hit.rank)},
            {"host", hit.host},
            {"signature", hit.sig->id},
            {"role", hit.sig->role},
            {"system", hit.sig->system},
            {"fields", hit.fields},
            {"text", hit.text}};
  j["time"] = hit.timeMs ? json(formatTimeMs(*hit.timeMs)) : json(nullptr);
  return j;
}

json signatureJson(const Signature& sig, const std::map<std::string, std::string>& meanings) {
  json j = {{"id", sig.id},           {"system", sig.system}, {"role", sig.role},     {"title", sig.title},
            {"meaning", sig.meaning}, {"causes", sig.causes}, {"remedy", sig.remedy}, {"source", sig.source}};
  if (!sig.vigil.empty()) {
    j["vigil"] = sig.vigil;
    if (const auto it = meanings.find(sig.vigil); it != meanings.end()) j["vigil_meaning"] = it->second;
  }
  return j;
}

const char* kindName(Report::Kind kind) {
  switch (kind) {
    case Report::Kind::Failure: return "failure";
    case Report::Kind::PeerLost: return "peer_lost";
    case Report::Kind::Reasoning: return "reasoning";
    case Report::Kind::WaitsOnly: return "waits_only";
    case Report::Kind::None: break;
  }
  return "none";
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string rankLabel(const std::optional<int>& rank) {
  return rank ? "rank " + std::to_string(*rank) : "rank ?";
}

// The timeline: one row per rank (ranks of the world without a line included, marked), time
// left to right; lines without a time in a band of their own on the right.
void writeTimeline(std::ostream& out, const LogScan& scan, const Report& report) {
  std::vector<std::optional<int>> rows;
  std::set<int> ranks(scan.ranksWithLines);
  for (int r = 0; r < scan.nranks.value_or(0) && ranks.size() < kMaxRows; ++r) ranks.insert(r);
  for (const Hit* hit : report.ordered)
    if (hit->rank && ranks.size() < kMaxRows) ranks.insert(*hit->rank);
  for (const int r : ranks)
    if (rows.size() < kMaxRows) rows.emplace_back(r);
  const bool unattributed =
      std::any_of(report.ordered.begin(), report.ordered.end(), [](const Hit* hit) { return !hit->rank; });
  if (unattributed) rows.emplace_back(std::nullopt);
  std::map<std::optional<int>, size_t> rowOf;
  for (size_t i = 0; i < rows.size(); ++i) rowOf[rows[i]] = i;

  int64_t t0 = 0, t1 = 0;
  bool any = false;
  for (const Hit* hit : report.ordered) {
    if (!hit->timeMs) continue;
    t0 = any ? std::min(t0, *hit->timeMs) : *hit->timeMs;
    t1 = any ? std::max(t1, *hit->timeMs) : *hit->timeMs;
    any = true;
  }
  const int width = kLeft + kPlot + 20 + kUntimed + 10;
  const int height = kTop + static_cast<int>(rows.size()) * kRow + 30;
  out << "<svg id=\"timeline-svg\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height << "\">\n";
  out << "<text x=\"" << kLeft << "\" y=\"18\" class=\"axis\">" << (any ? escape(formatTimeMs(t0)) : "no timestamps")
      << "</text>\n";
  if (any && t1 > t0)
    out << "<text x=\"" << kLeft + kPlot << "\" y=\"18\" class=\"axis\" text-anchor=\"end\">"
        << escape(formatTimeMs(t1)) << " (+" << (t1 - t0) / 1000.0 << " s)</text>\n";
  out << "<text x=\"" << kLeft + kPlot + 20 << "\" y=\"18\" class=\"axis\">no time</text>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const int y = kTop + static_cast<int>(i) * kRow + kRow / 2;
    const bool silent = rows[i] && !scan.ranksWithLines.contains(*rows[i]);
    const bool origin = rows[i] && report.origin && *rows[i] == *report.origin;
    std::string label = rankLabel(rows[i]);
    if (rows[i])
      if (const auto host = scan.hostOfRank.find(*rows[i]); host != scan.hostOfRank.end()) label += " " + host->second;
    out << "<g class=\"row" << (silent ? " silent" : "") << (origin ? " origin" : "") << "\" data-rank=\""
        << (rows[i] ? std::to_string(*rows[i]) : "?") << "\"><line x1=\"" << kLeft << "\" x2=\""
        << kLeft + kPlot + 20 + kUntimed << "\" y1=\"" << y << "\" y2=\"" << y << "\"/><text x=\"4\" y=\"" << y + 4
        << "\">" << escape(label.substr(0, 18)) << (silent ? " (no lines)" : "") << "</text></g>\n";
  }
  std::map<std::pair<std::optional<int>, std::string>, size_t> perRow;
  std::map<size_t, size_t> untimedPerRow;
  size_t marks = 0;
  for (const Hit* hit : report.ordered) {
    const auto row = rowOf.find(hit->rank);
    if (row == rowOf.end()) continue;
    const bool first = hit == report.hit;
    if (!first && (marks >= kMaxMarks || perRow[{hit->rank, hit->sig->id}]++ >= kMarksPerRow)) continue;
    ++marks;
    double x;
    if (hit->timeMs) {
      x = kLeft +
          (t1 > t0 ? static_cast<double>(*hit->timeMs - t0) / static_cast<double>(t1 - t0) * kPlot : kPlot / 2.0);
    } else {
      x = kLeft + kPlot + 24 + static_cast<double>(std::min<size_t>(untimedPerRow[row->second]++, 30)) * 2;
    }
    const int y = kTop + static_cast<int>(row->second) * kRow + kRow / 2;
    out << "<circle class=\"mark " << hit->sig->role << (first ? " first" : "") << "\""
        << (first ? " id=\"first-failure\"" : "") << " cx=\"" << x << "\" cy=\"" << y << "\" r=\"" << (first ? 8 : 4)
        << "\" data-signature=\"" << escape(hit->sig->id) << "\"><title>" << escape(rankLabel(hit->rank)) << " "
        << (hit->timeMs ? escape(formatTimeMs(*hit->timeMs)) : "") << "\n"
        << escape(hit->sig->id) << " (" << hit->sig->role << ")\n"
        << escape(hitLocation(scan, *hit)) << "\n"
        << escape(hit->text) << "</title></circle>\n";
    if (first) out << "<text class=\"first-label\" x=\"" << x + 11 << "\" y=\"" << y - 6 << "\">first failure</text>\n";
  }
  out << "</svg>\n";
}

constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1d1d1f; max-width: 1100px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 22px 0 8px; }
.summary { color: #555; margin: 0; }
#verdict { border: 2px solid #c0392b; background: #fdf0ee; padding: 10px 14px; border-radius: 6px; }
#verdict.kind-reasoning, #verdict.kind-waits_only { border-color: #d68910; background: #fdf6e8; }
#verdict.kind-none { border-color: #888; background: #f4f4f4; }
#verdict .headline { font-weight: 600; margin: 0 0 6px; }
dl { display: grid; grid-template-columns: 90px 1fr; gap: 2px 10px; margin: 6px 0 0; }
dt { color: #666; } dd { margin: 0; }
code, .line { font: 12px/1.4 ui-monospace, monospace; word-break: break-all; }
svg text { font: 11px ui-monospace, monospace; fill: #333; } svg .axis { fill: #777; }
svg .row line { stroke: #e2e2e2; } svg .row.silent text { fill: #c0392b; } svg .row.origin text { font-weight: 700; fill: #c0392b; }
svg .mark.cause { fill: #c0392b; } svg .mark.symptom { fill: #e67e22; } svg .mark.context { fill: #95a5a6; }
svg .mark.first { stroke: #000; stroke-width: 2.5; } svg .first-label { fill: #c0392b; font-weight: 700; }
.legend span { display: inline-block; margin-right: 14px; } .legend i { display: inline-block; width: 10px; height: 10px; border-radius: 5px; margin-right: 4px; }
table { border-collapse: collapse; width: 100%; } td, th { border-bottom: 1px solid #eee; padding: 3px 6px; text-align: left; vertical-align: top; }
tr.first-failure td { background: #fdf0ee; font-weight: 600; }
)";

// Runs in the browser only to prove the report was rendered: it counts what the timeline drew.
constexpr const char* kScript = R"(
(function () {
  var svg = document.getElementById('timeline-svg');
  var marks = svg.querySelectorAll('circle.mark').length;
  var rows = svg.querySelectorAll('g.row').length;
  var first = document.getElementById('first-failure');
  var origin = first ? first.getAttribute('data-signature') : null;
  document.getElementById('timeline-summary').textContent =
      'rendered: ' + rows + ' rank rows, ' + marks + ' events' + (origin ? ', first failure: ' + origin : '');
  document.body.classList.add('rendered');
})();
)";

}  // namespace

void printJson(const LogScan& scan, const KnowledgeBase& kb, const Report& report) {
  const std::map<std::string, std::string>& meanings = scan.vigilMeanings;
  json files = json::array();
  for (const LogFile& file : scan.files)
    files.push_back(
        {{"path", file.path}, {"lines", file.lines}, {"rank", optionalRank(file.rank)}, {"host", file.host}});
  json verdict = {{"kind", kindName(report.kind)},
                  {"text", report.headline},
                  {"rank", optionalRank(report.origin)},
                  {"host", report.originHost}};
  if (report.hit) {
    verdict["line"] = hitJson(scan, *report.hit);
    verdict["signature"] = signatureJson(*report.hit->sig, meanings);
  }
  if (report.finding) verdict["finding"] = *report.finding;
  json findings = json::array();
  for (const Finding& f : report.findings) {
    json evidence = json::array();
    for (const Hit* hit : f.evidence) evidence.push_back({{"file", scan.files[hit->file].path}, {"line", hit->line}});
    findings.push_back({{"text", f.text}, {"rank", optionalRank(f.blame)}, {"evidence", evidence}});
  }
  json hits = json::array();
  for (const Hit* hit : report.ordered) {
    if (hits.size() == kMaxJsonHits) break;
    hits.push_back(hitJson(scan, *hit));
  }
  std::set<std::string> matched;
  for (const Hit& hit : scan.hits) matched.insert(hit.sig->id);
  const json doc = {
      {"vigil_doctor_logs", 1},
      {"files", files},
      {"lines", scan.lines},
      {"ranks_with_lines", scan.ranksWithLines},
      {"nranks", scan.nranks ? json(*scan.nranks) : json(nullptr)},
      {"hosts", scan.hosts},
      {"signatures", {{"path", kb.path}, {"count", kb.signatures.size()}, {"matched", matched}}},
      {"verdict", verdict},
      {"only_waited", report.onlyWaited},
      {"findings", findings},
      {"timed_hits", report.timed},
      {"hits", hits},
      {"hits_left_out", report.ordered.size() - hits.size()},
  };
  std::cout << doc.dump(2) << "\n";
}

bool writeHtml(const LogScan& scan, const KnowledgeBase& kb, const Report& report, const std::string& path) {
  std::ostringstream out;
  const std::map<std::string, std::string>& meanings = scan.vigilMeanings;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>vigil-doctor: "
      << escape(report.headline.substr(0, 120)) << "</title>\n<style>" << kStyle << "</style></head>\n<body>\n";
  out << "<h1>vigil-doctor logs</h1>\n<p class=\"summary\">" << scan.files.size() << " file(s), " << scan.lines
      << " lines, ranks with lines: "
      << escape(scan.ranksWithLines.empty() ? "none named"
                                            : joinRanks({scan.ranksWithLines.begin(), scan.ranksWithLines.end()}))
      << (scan.nranks ? " of " + std::to_string(*scan.nranks) : "") << ", " << scan.hosts.size() << " host(s), "
      << scan.hits.size() << " matched line(s), " << kb.signatures.size() << " signatures</p>\n";
  out << "<section id=\"verdict\" class=\"kind-" << kindName(report.kind)
      << "\"><h2>Verdict</h2>\n<p class=\"headline\">" << escape(report.headline) << "</p>\n";
  if (report.hit) {
    const Signature& sig = *report.hit->sig;
    out << "<p class=\"line\">" << escape(hitLocation(scan, *report.hit)) << ": " << escape(report.hit->text)
        << "</p>\n<dl>"
        << "<dt>meaning</dt><dd>" << escape(sig.meaning) << "</dd><dt>causes</dt><dd><ul>";
    for (const std::string& cause : sig.causes) out << "<li>" << escape(cause) << "</li>";
    out << "</ul></dd><dt>remedy</dt><dd>" << escape(sig.remedy) << "</dd>";
    if (!sig.vigil.empty()) {
      const auto meaning = meanings.find(sig.vigil);
      out << "<dt>vigil</dt><dd><code>" << escape(sig.vigil) << "</code>";
      if (meaning != meanings.end()) out << " " << escape(meaning->second);
      out << "</dd>";
    }
    out << "<dt>source</dt><dd>" << escape(sig.source) << "</dd></dl>\n";
  }
  out << "</section>\n";
  out << "<section id=\"timeline\"><h2>Timeline</h2>\n<p class=\"legend\"><span><i style=\"background:#c0392b\"></i>"
         "failure</span><span><i style=\"background:#e67e22\"></i>wait</span><span><i style=\"background:#95a5a6\">"
         "</i>progress</span><span>black ring: the verdict's line</span></p>\n";
  writeTimeline(out, scan, report);
  out << "<p id=\"timeline-summary\">not rendered</p></section>\n";
  if (!report.onlyWaited.empty())
    out << "<section id=\"only-waited\"><h2>Only waited</h2><p>ranks "
        << escape(joinRanks({report.onlyWaited.begin(), report.onlyWaited.end()}))
        << " (no failure of their own)</p></section>\n";
  if (!report.findings.empty()) {
    out << "<section id=\"findings\"><h2>Across ranks</h2><ul>\n";
    for (const Finding& f : report.findings) {
      out << "<li>" << escape(f.text);
      for (const Hit* hit : f.evidence) out << "<br><code>" << escape(hitLocation(scan, *hit)) << "</code>";
      out << "</li>\n";
    }
    out << "</ul></section>\n";
  }
  out << "<section id=\"evidence\"><h2>Evidence</h2><table><tr><th>time</th><th>rank</th><th>signature</th><th>line"
         "</th></tr>\n";
  for (const Hit* hit : report.firstPerRankAndSignature())
    out << "<tr" << (hit == report.hit ? " class=\"first-failure\"" : "") << "><td>"
        << (hit->timeMs ? escape(formatTimeMs(*hit->timeMs)) : "") << "</td><td>" << escape(rankLabel(hit->rank))
        << (hit->host.empty() ? "" : " ") << escape(hit->host) << "</td><td>" << escape(hit->sig->id)
        << "</td><td><code>" << escape(hitLocation(scan, *hit)) << "</code><br><span class=\"line\">"
        << escape(hit->text) << "</span></td></tr>\n";
  out << "</table></section>\n<script>" << kScript << "</script>\n</body></html>\n";

  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << out.str();
  file.close();
  if (!file) {
    std::cerr << "vigil-doctor: " << path << ": cannot write the HTML report\n";
    return false;
  }
  return true;
}

}  // namespace vigil::doctor
