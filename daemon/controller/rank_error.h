// RankError: what a failed rank's last log lines say went wrong, so a job's
// event and failure reason carry the error itself ("EOFError: Ran out of
// input, at train.py:45 in load_snapshot: snapshot = torch.load(path)")
// instead of only "exited with code 1", as torchrun's error file does.
//
// NameRankError reads, in this order:
//   1. the last Python traceback: its exception line (the first unindented
//      line after the frames, with the message's continuation lines when the
//      tail ends inside it), and the deepest frame outside the Python
//      installation (site-packages, dist-packages, lib/pythonX.Y), falling
//      back to the deepest frame: "<exception>, at <file>:<line> in
//      <function>: <code>"; chained tracebacks ("During handling of the
//      above exception ...") name the last one;
//   2. a C++ exception that ended the process ("terminate called after
//      throwing an instance of 'T'" and its "what():" line);
//   3. the last line that says it is an error ("error", "Error", "ERROR",
//      "fatal", "Fatal", "FATAL", "Exception", "panic" as a word, or a
//      "...Error:" prefix), past a LibTorch error's backtrace ("Exception
//      raised from ...", "frame #N: ..."), whose message is the line above it.
// Lines are trimmed of trailing spaces and of ANSI colour codes; the answer
// is at most kMaxRankErrorChars characters (cut with "...").
//
// CrashSignature is the part of a named error that stays the same when a
// script fails the same way again: the exception line without numbers that
// change from run to run (addresses, pids, ports, times), so two attempts
// that died of the same cause compare equal.
//
// Thread safety: pure functions.
#ifndef TESSERA_DAEMON_CONTROLLER_RANK_ERROR_H_
#define TESSERA_DAEMON_CONTROLLER_RANK_ERROR_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace tessera::daemon {

inline constexpr size_t kMaxRankErrorChars = 400;

// The error named by a rank's last log lines (oldest first), or nullopt when
// no line says what went wrong.
std::optional<std::string> NameRankError(const std::vector<std::string>& log_tail);

// The named error with its run-to-run noise removed (see above).
std::string CrashSignature(const std::string& named_error);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_RANK_ERROR_H_
