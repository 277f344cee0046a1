#include "daemon/controller/rank_error.h"

#include <gtest/gtest.h>

namespace tessera::daemon {
namespace {

struct NameCase {
  const char* name;
  std::vector<std::string> tail;
  std::optional<std::string> want;
};

// A lab script's torch.load of a snapshot cut mid-write (Python 3.11).
const std::vector<std::string> kCutSnapshot = {
    "Epoch 3 | Batchsize: 32 | Steps: 64",
    "Traceback (most recent call last):",
    "  File \"/data/ckpt/multigpu_torchrun.py\", line 111, in <module>",
    "    main(args.save_every, args.total_epochs, args.batch_size)",
    "  File \"/data/ckpt/multigpu_torchrun.py\", line 41, in _load_snapshot",
    "    snapshot = torch.load(snapshot_path, map_location=loc)",
    "               ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    "  File \"/opt/venv/lib/python3.11/site-packages/torch/serialization.py\", line 1040, in load",
    "    return _legacy_load(opened_file, map_location, pickle_module, **pickle_load_args)",
    "EOFError: Ran out of input",
};

TEST(NameRankErrorTest, Table) {
  const std::vector<NameCase> cases = {
      {"python traceback names the exception and the script's own frame", kCutSnapshot,
       "EOFError: Ran out of input, at multigpu_torchrun.py:41 in _load_snapshot: snapshot = "
       "torch.load(snapshot_path, map_location=loc)"},
      {"chained tracebacks name the last one",
       {"Traceback (most recent call last):", "  File \"a.py\", line 1, in f", "    g()",
        "KeyError: 'x'", "", "During handling of the above exception, another exception occurred:",
        "", "Traceback (most recent call last):", "  File \"b.py\", line 9, in h", "    raise X()",
        "RuntimeError: second"},
       "RuntimeError: second, at b.py:9 in h: raise X()"},
      {"rank prefixes and colours are removed",
       {"[rank0]: Traceback (most recent call last):",
        "[rank0]:   File \"/w/train.py\", line 7, in <module>", "[rank0]:     step()",
        "[rank0]: \x1b[31mValueError: bad shape\x1b[0m"},
       "ValueError: bad shape, at train.py:7 in <module>: step()"},
      {"frames only in the installation: the deepest one",
       {"Traceback (most recent call last):",
        "  File \"/usr/lib/python3.11/runpy.py\", line 198, in _run_module_as_main",
        "    return _run_code(code, main_globals, None,",
        "  File \"/usr/lib/python3.11/site-packages/x/y.py\", line 5, in z", "    boom()",
        "OSError: [Errno 28] No space left on device"},
       "OSError: [Errno 28] No space left on device, at y.py:5 in z: boom()"},
      {"tail that begins inside the frames",
       {"    model.load(p)", "  File \"/s/run.py\", line 3, in go", "    open(p)",
        "FileNotFoundError: [Errno 2] No such file or directory: 'w.pt'"},
       "FileNotFoundError: [Errno 2] No such file or directory: 'w.pt', at run.py:3 in go: "
       "open(p)"},
      {"tail that ends inside the frames falls back to an error line",
       {"RuntimeError: earlier",
        "Traceback (most recent call last):", "  File \"/s/run.py\", line 3, in go"},
       "RuntimeError: earlier"},
      {"c++ terminate",
       {"step 3", "terminate called after throwing an instance of 'c10::Error'",
        "  what():  CUDA out of memory. Tried to allocate 2.00 GiB"},
       "c10::Error: CUDA out of memory. Tried to allocate 2.00 GiB"},
      {"tessera's own status text",
       {"rank 1: gloo on 127.0.0.1", "tessera-worker: not_found: checkpoint: no tensor conv1.w"},
       "tessera-worker: not_found: checkpoint: no tensor conv1.w"},
      {"a LibTorch error's backtrace is not the error: the line above it is",
       {"[E1127 18:25:10 socket.cpp:1028] [c10d] The client socket has timed out",
        "tessera-worker: unavailable: rendezvous with 10.0.0.4:29537 failed: The client socket "
        "has timed out after 60000ms while trying to connect to (10.0.0.4, 29537).",
        "Exception raised from throwTimeoutError at /pytorch/c10d/socket.cpp:1030 (most recent "
        "call first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9d (0x7f in libc10.so)",
        "frame #1: <unknown function> + 0x16daa1c (0x7f in libtorch_cpu.so)", ""},
       "tessera-worker: unavailable: rendezvous with 10.0.0.4:29537 failed: The client socket has "
       "timed out after 60000ms while trying to connect to (10.0.0.4, 29537)."},
      {"the last line that says error",
       {"loading", "error: cannot open /data/x.png", "retrying", "giving up"},
       "error: cannot open /data/x.png"},
      {"an error word inside a longer word does not count",
       {"errorless run", "terrors of the deep", "done"},
       std::nullopt},
      {"nothing names an error", {"step 1", "step 2"}, std::nullopt},
      {"empty tail", {}, std::nullopt},
  };
  for (const NameCase& c : cases) {
    EXPECT_EQ(NameRankError(c.tail), c.want) << c.name;
  }
}

TEST(NameRankErrorTest, LongErrorsAreCut) {
  std::string long_message = "RuntimeError: " + std::string(2000, 'x');
  auto named = NameRankError({long_message});
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->size(), kMaxRankErrorChars);
  EXPECT_EQ(named->substr(named->size() - 3), "...");
}

TEST(CrashSignatureTest, SameCauseComparesEqualAcrossRuns) {
  struct Case {
    const char* name;
    std::string a, b;
    bool same;
  };
  const std::vector<Case> cases = {
      {"same error, other pid and address",
       "RuntimeError: worker 4411 died at 0x7f00aa, at t.py:41 in f: g()",
       "RuntimeError: worker 5120 died at 0x7f99bb, at t.py:41 in f: g()", true},
      {"same message, other source line", "EOFError: Ran out of input, at t.py:41 in f: g()",
       "EOFError: Ran out of input, at t.py:42 in f: g()", false},
      {"other exception", "EOFError: Ran out of input, at t.py:41 in f: g()",
       "KeyError: 'x', at t.py:41 in f: g()", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(CrashSignature(c.a) == CrashSignature(c.b), c.same) << c.name;
  }
}

}  // namespace
}  // namespace tessera::daemon
