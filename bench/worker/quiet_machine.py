"""Running a benchmark on a machine that other work may share (bench/worker drivers).

busy_cpu_s / children_cpu_s count CPU time; wait_idle waits for a quiet machine;
measured(args, fn) runs fn() and runs it again (up to args.retries times) while other
processes took more than args.max_foreign cores on average, waiting up to
args.idle_wait seconds for an idle machine before each try; add_measured_arguments(ap)
declares those three options (--idle-wait, --max-foreign, --retries). Python 3 standard
library.
"""
import os
import resource
import time


def busy_cpu_s():
    """CPU-seconds the whole machine has spent busy since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    """CPU-seconds of this process's waited-for children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_idle(max_s):
    """Waits (up to max_s) until the machine is idle for 2 s: other work may share it."""
    deadline = time.time() + max_s
    quiet = 0
    while time.time() < deadline:
        b0 = busy_cpu_s()
        time.sleep(1.0)
        quiet = quiet + 1 if busy_cpu_s() - b0 < 0.15 else 0
        if quiet >= 2:
            return True
    return False


def add_measured_arguments(ap):
    """The options measured() reads, on an argparse parser."""
    ap.add_argument("--idle-wait", type=float, default=30,
                    help="before each run, wait up to this many seconds for an idle machine")
    ap.add_argument("--max-foreign", type=float, default=0.2,
                    help="repeat a run during which other processes used more cores than this")
    ap.add_argument("--retries", type=int, default=1)


def measured(args, fn):
    """Runs fn() (one benchmark run), again up to args.retries times while other processes
    took more than args.max_foreign cores on average; returns (result, foreign cores)."""
    for _ in range(args.retries + 1):
        wait_idle(args.idle_wait)
        b0, c0, t0 = busy_cpu_s(), children_cpu_s(), time.time()
        result = fn()
        wall = time.time() - t0
        foreign = max(0.0, (busy_cpu_s() - b0) - (children_cpu_s() - c0)) / wall
        if foreign <= args.max_foreign:
            break
    return result, foreign
