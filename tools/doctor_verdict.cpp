// `vigil-doctor logs`: the verdict over the matched lines of all ranks. The first failure in
// time is the verdict; the reasoning across ranks adds what no single line says: the rank that
// never entered the collective the others timed out in, ranks that called different
// collectives, ports in use by host, the ranks missing at init, ranks that exited early.

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>
#include <tuple>

#include "doctor_dump.hpp"
#include "doctor_logs.hpp"

namespace vigil::doctor {
namespace {

constexpr size_t kIndent = 12;  // "  meaning:  ": labels and text in two columns

bool earlier(const Hit& a, const Hit& b) {
  if (a.timeMs.has_value() != b.timeMs.has_value()) return a.timeMs.has_value();  // untimed lines last
  if (a.timeMs && *a.timeMs != *b.timeMs) return *a.timeMs < *b.timeMs;
  if (a.namedFirst != b.namedFirst) return a.namedFirst;  // the launcher's own "first observed"
  if (a.file != b.file) return a.file < b.file;
  return a.line < b.line;
}

std::optional<int64_t> numberField(const Hit& hit, const char* name) {
  const auto it = hit.fields.find(name);
  if (it == hit.fields.end()) return std::nullopt;
  std::string digits;
  for (const char c : it->second)
    if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  return std::stoll(digits);
}

std::string field(const Hit& hit, const char* name) {
  const auto it = hit.fields.find(name);
  return it == hit.fields.end() ? std::string() : it->second;
}

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  return text;
}

std::string ranksText(const std::set<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + joinRanks(std::vector<int>(ranks.begin(), ranks.end()));
}

// Every rank the job had, as far as the logs tell: the communicator size a line states, else up
// to the highest rank that wrote lines (ranks are numbered from 0, so a gap below it is a rank
// whose lines are missing).
std::set<int> everyRank(const LogScan& scan) {
  std::set<int> ranks(scan.ranksWithLines);
  const int top =
      std::max(scan.nranks.value_or(0), scan.ranksWithLines.empty() ? 0 : *scan.ranksWithLines.rbegin() + 1);
  for (int r = 0; r < top && r < (1 << 20); ++r) ranks.insert(r);
  return ranks;
}

std::set<int> silentRanks(const LogScan& scan) {
  std::set<int> silent;
  for (const int r : everyRank(scan))
    if (!scan.ranksWithLines.contains(r)) silent.insert(r);
  return silent;
}

std::string who(const Hit& hit) {
  std::string text = hit.rank ? "rank " + std::to_string(*hit.rank) : "an unattributed line";
  if (!hit.host.empty()) text += " (host " + hit.host + ")";
  return text;
}

std::string formatTime(int64_t ms) {
  const int64_t days = ms >= 0 ? ms / 86400000 : (ms - 86399999) / 86400000;
  const int64_t inDay = ms - days * 86400000;
  const auto [y, m, d] = civilFromDays(days);
  std::ostringstream out;
  out << std::setfill('0');
  if (y != 0) out << std::setw(4) << y << "-";  // year 0: the lines gave none (glog)
  out << std::setw(2) << m << "-" << std::setw(2) << d << " " << std::setw(2) << inDay / 3600000 << ":" << std::setw(2)
      << inDay / 60000 % 60 << ":" << std::setw(2) << inDay / 1000 % 60 << "." << std::setw(3) << inDay % 1000;
  return out.str();
}

// Ranks that timed out in a collective, by sequence number: the highest one is where the job
// stopped; ranks that never reached it are the stragglers, and different operations at the same
// sequence number mean the ranks' programs diverged.
void collectiveFindings(const LogScan& scan, std::vector<Finding>& findings) {
  std::map<int, const Hit*> timedOut;  // rank -> its timeout at the highest seq
  std::map<int, int64_t> maxSeq;
  for (const Hit& hit : scan.hits) {
    if (!hit.rank) continue;
    const auto seq = numberField(hit, "seq");
    if (!seq) continue;
    maxSeq[*hit.rank] = std::max(maxSeq.count(*hit.rank) ? maxSeq[*hit.rank] : *seq, *seq);
    if (!hit.sig->symptom() || field(hit, "op").empty()) continue;
    const Hit*& best = timedOut[*hit.rank];
    if (!best || *numberField(*best, "seq") < *seq) best = &hit;
  }
  if (timedOut.empty()) return;
  int64_t stopSeq = 0;
  for (const auto& [rank, hit] : timedOut) stopSeq = std::max(stopSeq, *numberField(*hit, "seq"));
  std::map<std::string, std::set<int>> opsAtStop;
  std::set<int> waiting;
  Finding mismatch, straggler;
  for (const auto& [rank, hit] : timedOut) {
    if (*numberField(*hit, "seq") != stopSeq) continue;
    const std::string numel = field(*hit, "numel");
    opsAtStop[upper(field(*hit, "op")) + (numel.empty() ? "" : " of " + numel + " element(s)")].insert(rank);
    waiting.insert(rank);
    if (mismatch.evidence.size() < 8) mismatch.evidence.push_back(hit);
  }
  const std::string seqText = " seq " + std::to_string(stopSeq);
  if (opsAtStop.size() > 1) {
    mismatch.text = "ranks ran different collectives at" + seqText + ":";
    for (const auto& [op, ranks] : opsAtStop) mismatch.text += " " + op + " on " + ranksText(ranks) + ";";
    mismatch.text +=
        " their programs diverged (vigil reports this as VG-OP-002 on every rank, before any data moves);"
        " a rank that ran out of data first (uneven batches per rank), took another branch or skipped a"
        " call is the one to read";
    mismatch.decisive = true;
    findings.push_back(std::move(mismatch));
  }
  std::set<int> behind, silent, quiet;  // quiet: wrote lines, none of them a timeout or a seq
  std::string behindText;
  for (const int rank : everyRank(scan)) {
    if (waiting.contains(rank)) continue;
    const auto seq = maxSeq.find(rank);
    if (seq != maxSeq.end() && seq->second < stopSeq) {
      behind.insert(rank);
      behindText += (behindText.empty() ? "" : "; ") + std::string("rank ") + std::to_string(rank) + " reached seq " +
                    std::to_string(seq->second);
      if (timedOut.contains(rank)) straggler.evidence.push_back(timedOut[rank]);
    } else if (!scan.ranksWithLines.contains(rank)) {
      silent.insert(rank);
    } else if (seq == maxSeq.end()) {
      quiet.insert(rank);
    }
  }
  std::set<std::string> opNames;
  for (const auto& [rank, hit] : timedOut)
    if (waiting.contains(rank)) opNames.insert(upper(field(*hit, "op")));
  std::string opText;
  for (const std::string& op : opNames) opText += (opText.empty() ? "" : "/") + op;
  const std::string others = ranksText(waiting) + " timed out in " + opText + seqText;
  if (!behind.empty()) {
    straggler.text = behindText + " and never entered" + seqText + "; " + others + " → " + ranksText(behind) +
                     (behind.size() == 1 ? " is" : " are") + " the straggler or diverged: read its log before" +
                     seqText +
                     " (a hang, a crash, a slower input path or a different branch); vigil reports this as VG-OP-001 " +
                     "on the waiting ranks, naming the rank that has not entered" + seqText;
    straggler.blame = *behind.begin();
  } else if (!silent.empty()) {
    straggler.text =
        others + "; " + ranksText(silent) + " wrote no log lines: " +
        (silent.size() == 1 ? "its log is missing or it died first" : "their logs are missing or they died first");
    straggler.blame = *silent.begin();
  } else if (!quiet.empty()) {
    // The ranks the waiting ones name as the peer they wait for, when the lines say (vigil's do).
    std::set<int> named;
    for (const auto& [rank, hit] : timedOut)
      if (const auto peer = numberField(*hit, "peer");
          peer && waiting.contains(rank) && quiet.contains(static_cast<int>(*peer)))
        named.insert(static_cast<int>(*peer));
    if (!named.empty()) quiet = named;
    const bool one = quiet.size() == 1;
    straggler.text = others + "; " + (named.empty() ? "" : (waiting.size() == 1 ? "it names " : "they name ")) +
                     ranksText(quiet) +
                     (named.empty() ? "" : " as the peer still to answer, and " + std::string(one ? "it" : "they")) +
                     " logged no timeout and no sequence number: " + (one ? "it is" : "they are") +
                     (named.empty() ? " the likely straggler" : " the straggler") + " (stuck before" + seqText +
                     ", or in another operation)";
    straggler.blame = *quiet.begin();
  } else {
    return;
  }
  for (const auto& [rank, hit] : timedOut)
    if (waiting.contains(rank) && straggler.evidence.size() < 4) straggler.evidence.push_back(hit);
  findings.push_back(std::move(straggler));
}

// The peers the waiting ranks name ("dst_rank[14]", "still receiving from rank 2"): those that
// logged neither a failure nor a wait of their own are where the job stopped, and ranks below
// the highest one seen that wrote no lines at all are missing from the inputs or died first.
void peerFindings(const LogScan& scan, std::vector<Finding>& findings) {
  std::set<int> waiters, failing, waitingRanks;
  std::map<int, std::vector<const Hit*>> namedBy;  // peer -> the waits that name it
  for (const Hit& hit : scan.hits) {
    if (!hit.rank) continue;
    if (hit.sig->cause()) failing.insert(*hit.rank);
    if (!hit.sig->symptom()) continue;
    waitingRanks.insert(*hit.rank);
    const auto peer = numberField(hit, "peer");
    if (!peer || *peer == *hit.rank || *peer >= (1 << 20)) continue;
    namedBy[static_cast<int>(*peer)].push_back(&hit);
  }
  std::set<int> unanswered, withoutLines;
  Finding f;
  for (const auto& [peer, hits] : namedBy) {
    if (failing.contains(peer) || waitingRanks.contains(peer)) continue;
    unanswered.insert(peer);
    if (!scan.ranksWithLines.contains(peer)) withoutLines.insert(peer);
    for (const Hit* hit : hits) {
      waiters.insert(*hit->rank);
      if (f.evidence.size() < 4 &&
          std::none_of(f.evidence.begin(), f.evidence.end(), [&](const Hit* e) { return e->rank == hit->rank; }))
        f.evidence.push_back(hit);
    }
  }
  if (unanswered.empty()) return;
  const bool one = unanswered.size() == 1;
  f.text = ranksText(waiters) + " waited for " + ranksText(unanswered) +
           " (their lines name the peer that did not answer), and " + (one ? "it" : "they") +
           " logged no failure or wait of " + (one ? "its" : "their") + " own → read " +
           (one ? "its log" : "their logs") + ": stuck, slower, or in another operation or phase";
  if (!withoutLines.empty()) f.text += " (" + ranksText(withoutLines) + ": no lines among the inputs)";
  if (const std::set<int> silent = silentRanks(scan); !silent.empty() && silent != withoutLines)
    f.text +=
        "; " + ranksText(silent) + " wrote no log lines at all: " +
        (silent.size() == 1 ? "its log is missing or it died first" : "their logs are missing or they died first");
  f.blame = *unanswered.begin();
  findings.push_back(std::move(f));
}

// One failure on many ranks or hosts, each on its own (no common peer): a cause they share
// (configuration, driver, fabric, a job-wide setting) is likelier than one failed rank.
void sharedFindings(const LogScan& scan, std::vector<Finding>& findings) {
  struct Seen {
    std::set<int> ranks;
    std::set<std::string> hosts, peers;
    std::vector<const Hit*> evidence;
  };
  std::map<const Signature*, Seen> bySignature;
  for (const Hit& hit : scan.hits) {
    // A launcher's exit reports (mpirun, srun, torchrun's elastic agent) say how each rank ended,
    // not what failed in it.
    const bool exitReport =
        hit.sig->system == "launcher" || !field(hit, "signal").empty() || hit.sig->id.starts_with("torch-elastic-");
    if (!hit.sig->cause() || exitReport || (!hit.rank && hit.host.empty())) continue;
    Seen& seen = bySignature[hit.sig];
    const bool newOrigin = hit.rank ? seen.ranks.insert(*hit.rank).second : seen.hosts.insert(hit.host).second;
    if (hit.rank && !hit.host.empty()) seen.hosts.insert(hit.host);
    const std::string peer = field(hit, "peer_host") + "/" + field(hit, "peer");
    if (peer != "/") seen.peers.insert(peer);
    if (newOrigin && seen.evidence.size() < 4) seen.evidence.push_back(&hit);
  }
  for (const auto& [sig, seen] : bySignature) {
    const size_t origins = seen.ranks.empty() ? seen.hosts.size() : seen.ranks.size();
    if (origins < 3 || (!seen.peers.empty() && seen.peers.size() < origins)) continue;
    std::string hosts;
    for (const std::string& host : seen.hosts) hosts += (hosts.empty() ? "" : ", ") + host;
    Finding f;
    f.text = (seen.ranks.empty() ? "hosts " + hosts
                                 : ranksText(seen.ranks) + (hosts.empty() ? "" : " (hosts " + hosts + ")")) +
             " report the same failure each on its own (" + sig->title + ")" +
             (seen.peers.empty() ? "" : ", each naming a different peer") +
             ": a cause they share (configuration, driver, fabric or a job-wide setting) is likelier than one failed "
             "rank";
    f.evidence = seen.evidence;
    findings.push_back(std::move(f));
  }
}

// Ports by host: a port this host could not bind (a line with a port and no peer) and an endpoint
// that several ranks could not reach or lost (a line with the peer's address and port).
void portFindings(const LogScan& scan, std::vector<Finding>& findings) {
  // A local port by host and port; a peer by its address, whatever port each connection had.
  std::map<std::tuple<bool, std::string, std::string>, std::vector<const Hit*>> byPort;
  for (const Hit& hit : scan.hits) {
    if (!hit.sig->cause() || field(hit, "port").empty()) continue;
    const std::string peer = field(hit, "peer_host");
    byPort[{!peer.empty(), peer.empty() ? hit.host : peer, peer.empty() ? field(hit, "port") : ""}].push_back(&hit);
  }
  for (const auto& [key, hits] : byPort) {
    const auto& [remote, host, port] = key;
    std::set<int> ranks;
    std::set<std::string> titles, ports;
    for (const Hit* hit : hits) {
      if (hit->rank) ranks.insert(*hit->rank);
      titles.insert(hit->sig->title);
      ports.insert(field(*hit, "port"));
    }
    std::string portList;
    for (const std::string& p : ports) portList += (portList.empty() ? "" : ", ") + p;
    Finding f;
    f.text = remote ? "peer " + host + " (port" + (ports.size() > 1 ? "s " : " ") + portList + ") failed for "
                    : "port " + port + " on host " + (host.empty() ? "(not named)" : host) + " failed for ";
    f.text += std::to_string(hits.size()) + " line(s)" + (ranks.empty() ? "" : " of " + ranksText(ranks)) + ":";
    for (const std::string& title : titles) f.text += " " + title + ";";
    if (!remote) f.text += " another process holds the port (an earlier job still running, two jobs with one port)";
    if (remote && ranks.size() > 1) f.text += " several ranks lost the same peer: that host or its process went away";
    f.evidence.assign(hits.begin(), hits.begin() + static_cast<long>(std::min<size_t>(hits.size(), 3)));
    findings.push_back(std::move(f));
  }
}

// "expected N, M arrived": the missing ranks are named when the logs show which ranks wrote
// lines and the count of those without any equals the count missing.
void initFindings(const LogScan& scan, std::vector<Finding>& findings) {
  for (const Hit& hit : scan.hits) {
    const auto expected = numberField(hit, "expected"), arrived = numberField(hit, "arrived");
    if (!expected || !arrived || *arrived >= *expected || *expected > 1 << 20) continue;
    Finding f;
    f.evidence.push_back(&hit);
    f.text = "init: " + std::to_string(*expected) + " ranks expected, " + std::to_string(*arrived) + " arrived (" +
             hit.sig->title + ")";
    std::set<int> silent;
    for (int r = 0; r < *expected; ++r)
      if (!scan.ranksWithLines.contains(r)) silent.insert(r);
    const size_t missing = static_cast<size_t>(*expected - *arrived);
    if (!silent.empty() && silent.size() == missing && silent.size() < static_cast<size_t>(*expected)) {
      f.text += "; missing: " + ranksText(silent) + " (the only ranks that wrote no log lines)";
      f.blame = *silent.begin();
    } else if (!silent.empty() && silent.size() < static_cast<size_t>(*expected)) {
      f.text += "; " + ranksText(silent) + " wrote no log lines, " + std::to_string(missing) +
                " are missing: the logs do not name them for certain";
    } else {
      f.text += "; " + std::to_string(missing) + " missing; the logs hold too few ranks' lines to name them";
    }
    findings.push_back(std::move(f));
    return;  // one count is enough: every waiting rank logs the same
  }
}

// Ranks that exited (a launcher's exit line, a signal) and ranks whose last iteration is behind.
void exitFindings(const LogScan& scan, std::vector<Finding>& findings) {
  std::map<int, const Hit*> exits;
  std::map<int, int64_t> lastIteration;
  for (const Hit& hit : scan.hits) {
    if (!hit.rank) continue;
    const bool exited = hit.sig->cause() && (!field(hit, "signal").empty() || hit.sig->system == "launcher");
    if (exited && !exits.contains(*hit.rank)) exits[*hit.rank] = &hit;
    if (const auto it = numberField(hit, "iteration"))
      lastIteration[*hit.rank] = std::max(lastIteration.count(*hit.rank) ? lastIteration[*hit.rank] : *it, *it);
  }
  for (const auto& [rank, hit] : exits) {
    Finding f;
    const std::string signal = field(*hit, "signal");
    f.text = "rank " + std::to_string(rank) + " exited" + (signal.empty() ? "" : " (signal " + signal + ")") + ": " +
             hit->sig->title;
    f.evidence.push_back(hit);
    f.blame = rank;
    findings.push_back(std::move(f));
  }
  if (lastIteration.size() < 2) return;
  int64_t top = 0;
  for (const auto& [rank, it] : lastIteration) top = std::max(top, it);
  std::set<int> behind;
  std::string text;
  for (const auto& [rank, it] : lastIteration) {
    if (it >= top) continue;
    behind.insert(rank);
    text += (text.empty() ? "" : "; ") + std::string("rank ") + std::to_string(rank) + " last logged iteration " +
            std::to_string(it);
  }
  if (behind.empty()) return;
  Finding f;
  f.text = text + ", while others reached " + std::to_string(top) + " → " + ranksText(behind) +
           " stopped (or fell behind) first";
  f.blame = *behind.begin();
  findings.push_back(std::move(f));
}

void printSignature(const Signature& sig, const std::map<std::string, std::string>& meanings) {
  printWrapped("meaning:", sig.meaning, kIndent);
  for (size_t i = 0; i < sig.causes.size(); ++i) printWrapped(i == 0 ? "causes:" : "", "- " + sig.causes[i], kIndent);
  printWrapped("remedy:", sig.remedy, kIndent);
  if (!sig.vigil.empty()) {
    const auto meaning = meanings.find(sig.vigil);
    printWrapped("vigil:",
                 sig.vigil + (meaning == meanings.end() ? "" : " (" + meaning->second + ")") +
                     ": vigil reports this situation with that id, naming the rank, the operation, the "
                     "peer involved and the remedy",
                 kIndent);
  }
  printWrapped("source:", sig.source, kIndent);
}

}  // namespace

std::string formatTimeMs(int64_t ms) {
  return formatTime(ms);
}

std::string hitLocation(const LogScan& scan, const Hit& hit) {
  return scan.files[hit.file].path + ":" + std::to_string(hit.line);
}

Report analyse(const LogScan& scan) {
  Report report;
  for (const Hit& hit : scan.hits) report.ordered.push_back(&hit);
  std::stable_sort(report.ordered.begin(), report.ordered.end(),
                   [](const Hit* a, const Hit* b) { return earlier(*a, *b); });
  report.timed = static_cast<size_t>(
      std::count_if(scan.hits.begin(), scan.hits.end(), [](const Hit& hit) { return hit.timeMs.has_value(); }));
  collectiveFindings(scan, report.findings);
  if (std::none_of(report.findings.begin(), report.findings.end(), [](const Finding& f) { return f.blame; }))
    peerFindings(scan, report.findings);
  sharedFindings(scan, report.findings);
  initFindings(scan, report.findings);
  portFindings(scan, report.findings);
  exitFindings(scan, report.findings);

  const auto firstOf = [&](bool (Signature::*role)() const) -> const Hit* {
    for (const Hit* hit : report.ordered)
      if ((hit->sig->*role)()) return hit;
    return nullptr;
  };
  // A launcher's report that names the first observed failure ("Root Cause" in torchrun's) is a
  // failure of that rank, whatever its entry holds.
  const Hit* cause = nullptr;
  for (const Hit* hit : report.ordered)
    if (hit->sig->cause() || (hit->namedFirst && hit->rank)) {
      cause = hit;
      break;
    }
  // A report of a lost peer is a consequence: when the lines carry no times that order it before
  // another rank's own failure (NCCL's lines have none), that failure comes first.
  const auto lostPeer = [](const Hit* hit) { return hit->sig->vigil.starts_with("VG-PEER"); };
  if (cause && lostPeer(cause))
    for (const Hit* hit : report.ordered)
      if (hit->sig->cause() && !lostPeer(hit) && hit->rank != cause->rank &&
          (!hit->timeMs || !cause->timeMs || *hit->timeMs == *cause->timeMs)) {
        cause = hit;
        break;
      }
  const Hit* symptom = firstOf(&Signature::symptom);
  std::optional<size_t> blamed;
  for (size_t i = 0; i < report.findings.size() && !blamed; ++i)
    if (report.findings[i].blame || report.findings[i].decisive) blamed = i;

  if (cause) {
    report.hit = cause;
    report.origin = cause->rank;
    report.originHost = cause->host;
    report.kind = Report::Kind::Failure;
    // A report of a lost peer (the knowledge base maps it to a VG-PEER id) is about that peer:
    // it is the rank that failed first, unless it logged an earlier failure of its own.
    const std::string peer = field(*cause, "peer"), peerHost = field(*cause, "peer_host");
    const bool peerRank = !peer.empty() && std::all_of(peer.begin(), peer.end(), ::isdigit) && peer.size() < 7;
    const std::string at = cause->timeMs ? " at " + formatTime(*cause->timeMs) : "";
    if (peerRank && cause->sig->vigil.starts_with("VG-PEER")) {
      report.kind = Report::Kind::PeerLost;
      report.origin = std::stoi(peer);
      report.originHost = peerHost;
      report.headline = "rank " + peer + (peerHost.empty() ? "" : " (host " + peerHost + ")") +
                        " failed first: " + who(*cause) + " reports it lost" + at + ": " + cause->sig->title;
    } else {
      report.headline = "the first failure is on " + who(*cause) + at +
                        (cause->namedFirst ? " (the launcher's report names it the first observed failure)" : "") +
                        ": " + cause->sig->title;
      if (!peer.empty() || !peerHost.empty())
        report.peerNote = peer + (peerHost.empty() ? "" : " at " + peerHost) +
                          ": the line names it; its own log and exit status tell whether it failed first";
    }
  } else if (blamed) {
    report.kind = Report::Kind::Reasoning;
    report.finding = blamed;
    report.origin = report.findings[*blamed].blame;
    if (report.origin)
      if (const auto host = scan.hostOfRank.find(*report.origin); host != scan.hostOfRank.end())
        report.originHost = host->second;
    report.headline = "no rank logged a failure of its own; reasoning across ranks: " + report.findings[*blamed].text;
  } else if (symptom) {
    report.kind = Report::Kind::WaitsOnly;
    report.hit = symptom;
    report.origin = symptom->rank;
    report.originHost = symptom->host;
    report.headline = "only waits were logged; the first is on " + who(*symptom) +
                      (symptom->timeMs ? " at " + formatTime(*symptom->timeMs) : "") + ": " + symptom->sig->title +
                      "; the rank that failed first left no known line (is its log among the inputs?)";
  } else {
    report.headline = "no known failure signature in these logs (" + std::to_string(scan.lines) + " lines)";
    return report;
  }

  std::set<int> causeRanks, waitRanks;
  for (const Hit& hit : scan.hits) {
    if (!hit.rank) continue;
    if (hit.sig->cause()) causeRanks.insert(*hit.rank);
    if (hit.sig->symptom()) waitRanks.insert(*hit.rank);
  }
  std::set_difference(waitRanks.begin(), waitRanks.end(), causeRanks.begin(), causeRanks.end(),
                      std::inserter(report.onlyWaited, report.onlyWaited.end()));
  if (report.origin) report.onlyWaited.erase(*report.origin);
  return report;
}

void printText(const LogScan& scan, const KnowledgeBase& kb, const Report& report, size_t maxEvidence) {
  const std::map<std::string, std::string>& meanings = scan.vigilMeanings;
  std::set<std::string> matched;
  for (const Hit& hit : scan.hits) matched.insert(hit.sig->id);
  std::cout << "logs: " << scan.files.size() << " file(s), " << scan.lines << " lines; ranks with lines: "
            << (scan.ranksWithLines.empty() ? "none named"
                                            : joinRanks({scan.ranksWithLines.begin(), scan.ranksWithLines.end()}))
            << (scan.nranks ? " of " + std::to_string(*scan.nranks) : "") << "; hosts: " << scan.hosts.size() << "; "
            << scan.hits.size() << " line(s) matched " << matched.size() << " signature(s) of " << kb.signatures.size()
            << "\n";
  std::cout << "verdict: " << report.headline << "\n";
  if (report.kind == Report::Kind::None) return;
  if (report.hit) {
    std::cout << "  line:     " << hitLocation(scan, *report.hit) << ": " << report.hit->text << "\n";
    if (!report.peerNote.empty()) printWrapped("peer:", report.peerNote, kIndent);
    printSignature(*report.hit->sig, meanings);
  }
  if (!report.onlyWaited.empty())
    std::cout << "only waited: " << ranksText(report.onlyWaited) << " (no failure of their own)\n";
  if (!report.findings.empty()) {
    std::cout << "across ranks:\n";
    for (const Finding& f : report.findings) {
      printWrapped("-", f.text, 4);
      for (const Hit* hit : f.evidence) std::cout << "      " << hitLocation(scan, *hit) << "\n";
    }
  }
  if (report.timed == 0)
    std::cout << "note: no matched line carries a timestamp: \"first\" is first in the order of the files given\n";
  else if (report.timed < scan.hits.size())
    std::cout
        << "note: " << scan.hits.size() - report.timed
        << " matched line(s) carry no timestamp (nor does a line before them): they are ordered after the timed ones\n";

  std::cout << "evidence (first line of each signature on each rank, in time order):\n";
  size_t printed = 0;
  const std::vector<const Hit*> firsts = report.firstPerRankAndSignature();
  for (const Hit* hit : firsts) {
    if (printed++ == maxEvidence) break;
    std::cout << "  " << hitLocation(scan, *hit) << " ["
              << (hit->rank ? "rank " + std::to_string(*hit->rank) : "rank ?")
              << (hit->host.empty() ? "" : ", " + hit->host) << "] " << hit->sig->id << ": " << hit->text << "\n";
  }
  if (firsts.size() > maxEvidence)
    std::cout << "  ... " << firsts.size() - maxEvidence << " more (--evidence N shows more)\n";
}

std::vector<const Hit*> Report::firstPerRankAndSignature() const {
  std::set<std::pair<std::optional<int>, std::string>> shown;
  std::vector<const Hit*> firsts;
  for (const Hit* hit : ordered)
    if (shown.insert({hit->rank, hit->sig->id}).second) firsts.push_back(hit);
  return firsts;
}

int runLogs(const std::vector<std::string>& inputs, const LogsOutput& output) {
  KnowledgeBase kb;
  LogScan scan;
  try {
    kb = KnowledgeBase::load(KnowledgeBase::locate(output.signatures));
    scan = scanLogs(kb, inputs);
  } catch (const InputError& e) {
    std::cerr << "vigil-doctor: " << e.what() << "\n";
    return 1;
  }
  const Report report = analyse(scan);
  if (output.json)
    printJson(scan, kb, report);
  else
    printText(scan, kb, report, output.maxEvidence);
  if (!output.htmlPath.empty() && !writeHtml(scan, kb, report, output.htmlPath)) return 1;
  return 0;
}

}  // namespace vigil::doctor
