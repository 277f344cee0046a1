#!/usr/bin/env bash
# Tessera on a real GPU: the binaries are built here (Debian 12) and carried to
# a GPU machine that has Python with PyPI's torch (same version as the build's),
# nvidia-smi and the NVIDIA driver, but none of Debian's libraries; there
# scripts/gpu_check.py runs every GPU section and writes a report.
#
#   scripts/gpu-check.sh --prepare [--build build] [--dest gpu-check]
#       Here, after a build: stripped copies of tesserad, tessera-agent,
#       tessera-device-bench, tessera-worker, tessera and data_loader_bench into
#       DEST/bin, and into
#       DEST/lib every shared library ldd lists for them except glibc, libgcc_s,
#       libstdc++ and torch's / NVIDIA's (those come with torch there), under
#       their SONAMEs. Fails if DEST is over 48 MiB.
#   scripts/gpu-check.sh --run [--dest gpu-check] [--out DIR] [--device cuda:0|cpu] [--quick]
#       On the GPU machine: checks that every binary finds its libraries (DEST/lib,
#       torch's lib folder and the nvidia/*/lib folders of python3's torch), then
#       runs gpu_check.py (8 minutes at most) and prints the report's path.
#       --out defaults to DEST/out.
#   scripts/gpu-check.sh --cpu-test BUILD_DIR OUT_DIR
#       Here, a test: gpu_check.py on the build tree's binaries with --device cpu
#       --quick (sections that need a GPU are skipped); about 3 minutes on 2 cores.
#       Exit status non-zero when a section FAILED.
#
# Python: $TESSERA_PYTHON, default python3 (it must import torch).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${TESSERA_PYTHON:-python3}
# Program -> its path in a build tree.
programs=(daemon/tesserad agent/tessera-agent agent/tessera-device-bench
          worker/runtime/tessera-worker cli/tessera bench/worker/data_loader_bench)
max_bytes=$((48 << 20))

die() { echo "gpu-check: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

mode=""
build=$root/build
dest=$root/gpu-check
out=""
device=cuda:0
quick=()
while [ $# -gt 0 ]; do
  case $1 in
    --prepare|--run) mode=${1#--} ;;
    --cpu-test)
      mode=cpu-test
      [ $# -ge 3 ] || usage
      build=$2 out=$3
      shift 2 ;;
    --build) build=${2:?}; shift ;;
    --dest) dest=${2:?}; shift ;;
    --out) out=${2:?}; shift ;;
    --device) device=${2:?}; shift ;;
    --quick) quick=(--quick) ;;
    -h|--help) usage ;;
    *) echo "gpu-check: unknown argument $1" >&2; usage ;;
  esac
  shift
done
[ -n "$mode" ] || usage
dest=$(abspath "$dest")
build=$(abspath "$build")

# Libraries the GPU machine has itself (glibc, the compiler's runtime) or gets
# with torch (torch, CUDA, cuDNN, NCCL, ...): not carried.
skip_lib() {
  local name=$1 path=$2
  case $path in */torch/lib/*|*/nvidia/*|*/cuda*) return 0 ;; esac
  case $name in
    linux-vdso.so*|linux-gate.so*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*) return 0 ;;
    librt.so*|libresolv.so*|libutil.so*|libanl.so*|libnsl.so*|libnss_*) return 0 ;;
    libBrokenLocale.so*) return 0 ;;
    libmvec.so*|libthread_db.so*|libgcc_s.so*|libstdc++.so*) return 0 ;;
    libtorch*|libc10*|libcaffe2*|libshm.so*|libcuda*|libcudart*|libnccl*|libnv*) return 0 ;;
    libcublas*|libcudnn*|libcufft*|libcurand*|libcusparse*|libcusolver*|libcupti*) return 0 ;;
    libcufile*|libnvshmem*|libgomp*) return 0 ;;
  esac
  return 1
}

prepare() {
  local rel src name bin_dir=$dest/bin lib_dir=$dest/lib
  for rel in "${programs[@]}"; do
    [ -x "$build/$rel" ] || die "$build/$rel not found (build it first)"
  done
  rm -rf "$bin_dir" "$lib_dir"
  mkdir -p "$bin_dir" "$lib_dir"
  for rel in "${programs[@]}"; do
    src=$build/$rel
    name=$(basename "$rel")
    strip --strip-debug -o "$bin_dir/$name" "$src" 2>/dev/null ||
      objcopy --strip-debug "$src" "$bin_dir/$name" || die "cannot strip $src"
    chmod 755 "$bin_dir/$name"
    # "libfoo.so.1 => /path/libfoo.so.1 (0x...)"; the left name is the SONAME asked for.
    local line lib path missing=""
    while IFS= read -r line; do
      case $line in
        *"=> not found"*) missing+=" ${line%% =>*}" ; continue ;;
        *"=>"*) ;;
        *) continue ;;
      esac
      lib=$(echo "${line%%=>*}" | tr -d '[:space:]')
      path=$(echo "${line#*=> }" | sed 's/ (0x[0-9a-f]*)$//')
      [ -n "$path" ] || continue
      skip_lib "$lib" "$path" && continue
      [ -e "$lib_dir/$lib" ] || cp -L "$path" "$lib_dir/$lib"
    done < <(ldd "$src")
    [ -z "$missing" ] || die "$src: libraries not found here:$missing"
  done
  chmod 644 "$lib_dir"/* 2>/dev/null || true
  {
    echo "built from $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')" \
      "$(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo '(with local changes)')"
    echo "prepared $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n)"
    (cd "$dest" && ls -l bin lib)
  } > "$dest/MANIFEST"
  local bytes
  bytes=$(du -sb "$dest/bin" "$dest/lib" | awk '{s += $1} END {print s}')
  echo "gpu-check: $dest: $(ls "$bin_dir" | wc -l) programs, $(ls "$lib_dir" | wc -l) libraries:"
  ls "$lib_dir" | sed 's/^/  /'
  echo "gpu-check: total $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}') MiB"
  [ "$bytes" -le "$max_bytes" ] || die "over $((max_bytes >> 20)) MiB"
}

# LD path of the carried libraries and of python's torch (lib, nvidia/*/lib).
library_path() {
  local torch_dir site d paths
  torch_dir=$("$py" -c 'import torch, os; print(os.path.dirname(torch.__file__))') ||
    die "$py cannot import torch"
  site=$(dirname "$torch_dir")
  paths=$dest/lib:$torch_dir/lib
  for d in "$site"/nvidia/*/lib "$site"/nvidia/cu*/lib; do
    [ -d "$d" ] || continue
    case ":$paths:" in *":$d:"*) ;; *) paths+=:$d ;; esac
  done
  echo "$paths"
}

run() {
  [ -d "$dest/bin" ] || die "$dest/bin not found (scripts/gpu-check.sh --prepare, then carry it)"
  out=$(abspath "${out:-$dest/out}")
  mkdir -p "$out"
  local ldp b bad=0 missing
  ldp=$(library_path)
  echo "gpu-check: library path for the binaries: $ldp"
  for b in "$dest"/bin/*; do
    missing=$(LD_LIBRARY_PATH=$ldp timeout 30 ldd "$b" 2>&1 |
      grep -E 'not found|not a dynamic' || true)
    if [ -n "$missing" ]; then
      echo "gpu-check: $(basename "$b") cannot load:" >&2
      echo "$missing" | sed 's/^/  /' >&2
      bad=1
    fi
  done
  [ "$bad" = 0 ] || die "binaries miss libraries (see above)"
  # Python keeps its own library path: the carried Debian libraries are for
  # Tessera's binaries, which gpu_check.py starts with --ld-library-path.
  local rc=0
  timeout -k 10 470 "$py" "$root/scripts/gpu_check.py" --bin "$dest/bin" --out "$out" \
    --device "$device" "${quick[@]}" --ld-library-path "$ldp" --deadline-s 430 || rc=$?
  [ "$rc" = 124 ] && echo "gpu-check: gpu_check.py ran past 470 s and was stopped" >&2
  echo "gpu-check: report: $out/gpu-check-report.md"
  return "$rc"
}

cpu_test() {
  [ -d "$build" ] || die "$build: no build folder"
  out=$(abspath "$out")
  mkdir -p "$out"
  local rc=0
  timeout -k 10 300 "$py" "$root/scripts/gpu_check.py" --bin-tree "$build" --out "$out" \
    --device cpu --quick --deadline-s 240 || rc=$?
  [ "$rc" = 124 ] && echo "gpu-check: gpu_check.py ran past 300 s and was stopped" >&2
  echo "gpu-check: report: $out/gpu-check-report.md"
  return "$rc"
}

case $mode in
  prepare) prepare ;;
  run) run ;;
  cpu-test) cpu_test ;;
esac
