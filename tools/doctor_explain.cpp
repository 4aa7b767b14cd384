// `vigil-doctor explain VG-XXX-NNN`: the long form of an error id, read from docs/errors.md so
// that the text users see is the one the documentation (and its unit test) keeps in step.

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "doctor_dump.hpp"

namespace vigil::doctor {
namespace {

namespace fs = std::filesystem;

constexpr size_t kWidth = 100;
constexpr size_t kIndent = 11;  // "  Remedy:  " — labels and text line up in two columns

fs::path executableDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return fs::current_path();
  return fs::path(std::string(buf, static_cast<size_t>(n))).parent_path();
}

// Installed layout first, then the source tree as seen from a build directory (build/tools/ or build/).
std::vector<fs::path> docCandidates() {
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("VIGIL_DOCS_DIR"); dir && *dir) candidates.push_back(fs::path(dir) / "errors.md");
  const fs::path exe = executableDir();
  candidates.push_back(exe / "../share/doc/vigil/errors.md");
  candidates.push_back(exe / "../docs/errors.md");
  candidates.push_back(exe / "../../docs/errors.md");
  for (fs::path& path : candidates) path = path.lexically_normal();
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());  // exe at / or /x
  return candidates;
}

std::string trim(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), '`'), text.end());  // markdown code spans read fine bare
  const size_t first = text.find_first_not_of(" \t");
  const size_t last = text.find_last_not_of(" \t\r");
  return first == std::string::npos ? "" : text.substr(first, last - first + 1);
}

// One "**Label:** text" field of a section; paragraphs without a label have an empty label.
struct Field {
  std::string label, text;
};

std::vector<Field> parseSection(const std::vector<std::string>& lines) {
  std::vector<Field> fields;
  bool inParagraph = false;
  for (const std::string& line : lines) {
    const std::string text = trim(line);
    if (text.empty()) {
      inParagraph = false;
      continue;
    }
    const size_t close = text.find(":**");
    if (text.starts_with("**") && close != std::string::npos) {
      fields.push_back({text.substr(2, close - 2), trim(text.substr(close + 3))});
    } else if (inParagraph && !fields.empty()) {
      fields.back().text += " " + text;
    } else {
      fields.push_back({"", text});
    }
    inParagraph = true;
  }
  return fields;
}

}  // namespace

void printWrapped(const std::string& label, const std::string& text, size_t indent) {
  std::string line = "  " + label;
  line.resize(std::max(indent, line.size() + 1), ' ');
  std::istringstream words(text);
  std::string word;
  bool lineHasWord = false;
  while (words >> word) {
    if (lineHasWord && line.size() + 1 + word.size() > kWidth) {
      std::cout << line << "\n";
      line = std::string(indent, ' ');
      lineHasWord = false;
    }
    line += (lineHasWord ? " " : "") + word;
    lineHasWord = true;
  }
  std::cout << line << "\n";
}

int runExplain(const std::string& rawId, const std::string& docsPath) {
  std::string id = rawId;
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::toupper(c); });

  std::vector<fs::path> candidates = docsPath.empty() ? docCandidates() : std::vector<fs::path>{docsPath};
  std::ifstream in;
  for (const fs::path& path : candidates) {
    in.open(path);
    if (in) break;
    in.clear();
  }
  if (!in.is_open()) {
    std::string tried;
    for (const fs::path& path : candidates) tried += "\n  " + path.string();
    std::cerr << "vigil-doctor: cannot find errors.md; looked in:" << tried
              << "\npass --docs PATH/errors.md or set VIGIL_DOCS_DIR to the folder that holds it\n";
    return 1;
  }

  std::vector<std::string> known;
  std::vector<std::string> section;
  bool inTarget = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) {
      const std::string heading = trim(line.substr(3));
      inTarget = heading == id;
      if (heading.starts_with("VG-")) known.push_back(heading);
      continue;
    }
    if (inTarget) section.push_back(line);
  }
  if (std::find(known.begin(), known.end(), id) == known.end()) {
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    std::cerr << "vigil-doctor: unknown error id " << rawId << "; known ids: " << list << "\n";
    return 2;
  }
  std::cout << id << "\n";
  for (const Field& field : parseSection(section))
    printWrapped(field.label.empty() ? "" : field.label + ":", field.text, kIndent);
  return 0;
}

}  // namespace vigil::doctor
