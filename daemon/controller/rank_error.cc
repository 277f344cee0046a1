// NameRankError, in the order the header gives:
//   1. clean every line (rank prefixes such as "[rank0]: ", ANSI colours,
//      trailing spaces);
//   2. the last Python traceback: its frames, then its exception line;
//   3. else a C++ terminate message and its what();
//   4. else the last line that calls itself an error.
#include "daemon/controller/rank_error.h"

#include <cctype>
#include <regex>
#include <string_view>

#include "common/status.h"

namespace tessera::daemon {
namespace {

std::string Clean(std::string line) {
  static const std::regex kAnsi("\x1b\\[[0-9;]*[A-Za-z]");
  static const std::regex kRankPrefix(R"re(^\[(?:rank|default)\d+\]:\s?)re");
  line = std::regex_replace(line, kAnsi, "");
  line = std::regex_replace(line, kRankPrefix, "");
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
    line.pop_back();
  }
  return line;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string Cap(std::string s) {
  if (s.size() <= kMaxRankErrorChars) return s;
  s.resize(kMaxRankErrorChars - 3);
  return s + "...";
}

struct Frame {
  std::string file, line, function, code;
};

bool InPythonInstallation(const std::string& file) {
  static const std::regex kLib(
      R"re((site-packages|dist-packages)/|/lib/python\d+(\.\d+)?/|^<frozen )re");
  return std::regex_search(file, kLib);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Lines made only of carets, tildes and spaces: Python 3.11's markers under
// the failing expression.
bool IsMarker(const std::string& line) {
  std::string t = Trim(line);
  if (t.empty()) return false;
  for (char c : t) {
    if (c != '^' && c != '~' && c != ' ') return false;
  }
  return true;
}

std::optional<std::string> FromTraceback(const std::vector<std::string>& lines) {
  static const std::regex kFrame(R"re(^\s+File "(.+)", line (\d+), in (.+)$)re");
  size_t start = lines.size();
  bool headed = false;
  for (size_t i = lines.size(); i-- > 0;) {
    if (lines[i].rfind("Traceback (most recent call last):", 0) == 0) {
      start = i + 1;
      headed = true;
      break;
    }
  }
  if (!headed) {
    // The tail began inside the traceback: its frames start at the first
    // frame line of the last run of them.
    size_t last = lines.size();
    for (size_t i = lines.size(); i-- > 0;) {
      if (std::regex_match(lines[i], kFrame)) {
        last = i;
        break;
      }
    }
    if (last == lines.size()) return std::nullopt;
    start = last;
    while (start > 0 && (std::regex_match(lines[start - 1], kFrame) ||
                         (!lines[start - 1].empty() &&
                          std::isspace(static_cast<unsigned char>(lines[start - 1][0]))))) {
      --start;
    }
  }
  std::vector<Frame> frames;
  size_t i = start;
  for (; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    std::smatch m;
    if (std::regex_match(line, m, kFrame)) {
      frames.push_back({m[1], m[2], m[3], ""});
    } else if (!line.empty() && std::isspace(static_cast<unsigned char>(line[0]))) {
      if (!frames.empty() && frames.back().code.empty() && !IsMarker(line)) {
        frames.back().code = Trim(line);
      }
    } else if (!line.empty()) {
      break;  // the exception line
    }
  }
  if (i >= lines.size()) return std::nullopt;  // the tail ends inside the frames
  std::string exception = Trim(lines[i]);
  if (frames.empty()) return exception;
  const Frame* where = &frames.back();
  for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
    if (!InPythonInstallation(f->file)) {
      where = &*f;
      break;
    }
  }
  std::string out =
      exception + ", at " + BaseName(where->file) + ":" + where->line + " in " + where->function;
  if (!where->code.empty()) out += ": " + where->code;
  return out;
}

std::optional<std::string> FromTerminate(const std::vector<std::string>& lines) {
  static const std::regex kTerminate(
      R"re(terminate called after throwing an instance of '(.+)')re");
  for (size_t i = lines.size(); i-- > 0;) {
    std::smatch m;
    if (!std::regex_search(lines[i], m, kTerminate)) continue;
    std::string type = m[1];
    if (i + 1 < lines.size()) {
      std::string next = Trim(lines[i + 1]);
      if (next.rfind("what():", 0) == 0) return type + ": " + Trim(next.substr(7));
    }
    return "uncaught " + type;
  }
  return std::nullopt;
}

bool CallsItselfAnError(const std::string& line) {
  static const std::regex kWord(
      R"re((^|[^A-Za-z])(error|Error|ERROR|fatal|Fatal|FATAL|Exception|panic)([^A-Za-z]|$))re");
  static const std::regex kErrorPrefix(R"re(^[\w.]*(Error|Exception)\b:)re");
  if (std::regex_search(line, kWord) || std::regex_search(line, kErrorPrefix)) return true;
  // Tessera's own Status text: "<program>: <code>: message".
  for (StatusCode code :
       {StatusCode::kInvalidArgument, StatusCode::kUnauthenticated, StatusCode::kPermissionDenied,
        StatusCode::kNotFound, StatusCode::kAlreadyExists, StatusCode::kFailedPrecondition,
        StatusCode::kResourceExhausted, StatusCode::kUnavailable, StatusCode::kInternal}) {
    if (line.find(": " + std::string(StatusCodeName(code)) + ": ") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// A line of a LibTorch (c10) error's backtrace, which follows its message:
// "Exception raised from <function> at <file> (most recent call first):",
// then "frame #<n>: <symbol> ...".
bool IsBacktraceLine(const std::string& line) {
  static const std::regex kFrame(R"re(^\s*frame #[0-9]+: )re");
  return line.starts_with("Exception raised from ") || std::regex_search(line, kFrame);
}

}  // namespace

std::optional<std::string> NameRankError(const std::vector<std::string>& log_tail) {
  std::vector<std::string> lines;
  lines.reserve(log_tail.size());
  for (const std::string& l : log_tail) lines.push_back(Clean(l));
  if (auto t = FromTraceback(lines)) return Cap(*t);
  if (auto t = FromTerminate(lines)) return Cap(*t);
  for (size_t i = lines.size(); i-- > 0;) {
    if (!IsBacktraceLine(lines[i]) && CallsItselfAnError(lines[i])) return Cap(Trim(lines[i]));
  }
  return std::nullopt;
}

std::string CrashSignature(const std::string& named_error) {
  // Hex addresses, then every run of digits that is not a source line
  // number (":<n> in"), become "#".
  static const std::regex kHex("0x[0-9a-fA-F]+");
  static const std::regex kLineNumber(R"re(:(\d+) in )re");
  static const std::regex kDigits("[0-9]+");
  std::string s = std::regex_replace(named_error, kHex, "#");
  // Keep "file:line in" intact: the failing line is part of the cause.
  std::string out;
  std::smatch m;
  std::string rest = s;
  while (std::regex_search(rest, m, kLineNumber)) {
    out += std::regex_replace(m.prefix().str(), kDigits, "#");
    out += m.str(0);
    rest = m.suffix();
  }
  out += std::regex_replace(rest, kDigits, "#");
  return out;
}

}  // namespace tessera::daemon
