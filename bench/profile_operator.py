"""Run `vllm-operator` under a sampling profiler of all its threads, for operator_scale.py.

cProfile sees only the thread it runs in, and the passes run on pool threads. This samples
every thread's stack (sys._current_frames) every 10 ms and, at exit, writes JSON: CPU seconds
per thread group (from /proc, noted every second, as pool threads end before the exit), the
samples by kind (running Python or waiting for the GIL, waiting for an API answer, idle), and
the functions on the stacks of non-idle samples, inclusive, with their share. Idle: a thread
parked in a lock/queue/selector wait with nothing to do.

    python bench/profile_operator.py OUT.json run -n NAMESPACE ...
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import re
import sys
import threading
from pathlib import Path
from types import FrameType

INTERVAL = 0.01
# a leaf frame (file, function) that is waiting, and what for: an API answer is busy time
WAITS = {
    ("threading.py", "wait"): "idle",
    ("threading.py", "_wait_for_tstate_lock"): "idle",
    ("queue.py", "get"): "idle",
    ("thread.py", "_worker"): "idle",
    ("selectors.py", "select"): "idle",
    ("socket.py", "readinto"): "API wait",
    ("ssl.py", "read"): "API wait",
    ("ssl.py", "recv_into"): "API wait",
    ("ssl.py", "do_handshake"): "API wait",
    ("connection.py", "create_connection"): "API wait",
}
GROUPS = (
    ("spec", "spec passes"),
    ("status", "status passes"),
    ("ThreadPoolExecutor", "kopf's executor and asyncio.to_thread"),
    ("MainThread", "kopf's event loop"),
    ("sampler", "this profiler"),
)


def _where(frame: FrameType) -> str:
    path = frame.f_code.co_filename
    short = re.sub(r".*/(site-packages|operator)/", "", path)
    return f"{short}:{frame.f_code.co_name}"


class Sampler:
    def __init__(self) -> None:
        self.inclusive: collections.Counter[str] = collections.Counter()
        self.kinds: collections.Counter[str] = collections.Counter()
        self.busy = 0
        self.stop = threading.Event()
        self.thread_cpu: dict[int, tuple[str, float]] = {}  # native id -> (name, CPU s)

    def run(self) -> None:
        me = threading.get_ident()
        ticks = 0
        while not self.stop.wait(INTERVAL):
            for tid, frame in sys._current_frames().items():
                if tid != me:
                    self.sample(frame)
            ticks += 1
            if ticks % 100 == 0:  # pool threads end before exit: note their CPU while they live
                self.thread_cpu.update(thread_cpu())

    def sample(self, frame: FrameType) -> None:
        code = frame.f_code
        kind = WAITS.get((os.path.basename(code.co_filename), code.co_name), "CPU")
        self.kinds[kind] += 1
        if kind == "idle":
            return
        self.busy += 1
        seen = set()
        f: FrameType | None = frame
        while f is not None:
            seen.add(_where(f))
            f = f.f_back
        self.inclusive.update(seen)


def thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds of each live thread of this process, by native id, with its name."""
    ticks = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}
    out = {}
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / ticks
            out[int(task.name)] = (names.get(int(task.name), "other"), cpu)
    return out


def by_group(threads: dict[int, tuple[str, float]]) -> dict[str, float]:
    groups: dict[str, float] = collections.defaultdict(float)
    for name, cpu in threads.values():
        group = next((label for prefix, label in GROUPS if name.startswith(prefix)), name)
        groups[group] += cpu
    return {k: round(v, 2) for k, v in sorted(groups.items())}


def dump(sampler: Sampler, out: Path) -> None:
    sampler.stop.set()
    busy = max(1, sampler.busy)
    top = [
        {"where": where, "share_of_busy": round(n / busy, 3)}
        for where, n in sampler.inclusive.most_common(60)
    ]
    out.write_text(
        json.dumps(
            {
                "interval_s": INTERVAL,
                "samples_by_kind": dict(sampler.kinds),
                "cpu_s_by_thread_group": by_group({**sampler.thread_cpu, **thread_cpu()}),
                "busy_samples": sampler.busy,
                "inclusive": top,
            },
            indent=2,
        )
        + "\n"
    )


def main() -> None:
    out = Path(sys.argv[1])
    sampler = Sampler()
    threading.Thread(target=sampler.run, daemon=True, name="sampler").start()
    atexit.register(dump, sampler, out)
    from vllm_operator.cli import main as cli

    sys.argv = ["vllm-operator", *sys.argv[2:]]
    code = cli()
    sys.exit(code)


if __name__ == "__main__":
    main()
