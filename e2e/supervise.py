"""Supervise the local control plane as a kubelet supervises static pods: restart what exits.

    supervise.py --state DIR --cluster-dir DIR -- kwokctl create cluster ...

Runs the create command as its child after making itself a child subreaper (prctl), so the
components kwokctl forks (setsid, then kwokctl exits) are re-parented here: their exit codes
can be read, and a component that exits (a lost leader lease, a crash, a test's SIGKILL) is
started again with the command line, working directory and environment it had, its output
appended to the same log, its pid written to kwokctl's pid file (so `kwokctl delete` stops it).

Files under --state:
  created       the create command's exit code, once it returned (cluster.sh waits for it)
  events.jsonl  one JSON line per exit and restart (tests count restarts from it)
  log           the same, for people
  hold/NAME     while present, NAME is not restarted (a test keeps a component down)

Restarts back off like CrashLoopBackOff: at once after a component ran 10 s or more, else 0.5 s
doubling to 10 s. SIGTERM stops the components (SIGTERM, then SIGKILL after 15 s), reaps them and
exits; `cluster.sh down` sends it first, then lets kwokctl clean up.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
STEADY_SECONDS = 10.0  # ran this long: the next exit restarts at once
MAX_BACKOFF = 10.0
POLL = 0.2


@dataclass
class Component:
    name: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    pid: int
    started: float = field(default_factory=time.monotonic)
    quick_exits: int = 0
    due: float | None = None  # monotonic time of the pending restart


EXEC_SETTLE_SECONDS = 10.0


def read_component(name: str, pid: int) -> Component:
    proc = Path(f"/proc/{pid}")
    # A process in the middle of execve already shows its new exe but an empty cmdline: the
    # kernel sets the argument area (mm->arg_start..arg_end) only after it swapped in the new
    # memory map (fs/exec.c begin_new_exec, then fs/binfmt_elf.c create_elf_tables). A pid file
    # written right after the exec can be read in that window, so wait for the arguments.
    deadline = time.monotonic() + EXEC_SETTLE_SECONDS
    while True:
        argv = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
        if argv:
            break
        if time.monotonic() >= deadline:
            raise RuntimeError(f"supervise: pid {pid} ({name}) shows no command line")
        time.sleep(0.05)
    env = dict(
        item.decode().partition("=")[::2]
        for item in (proc / "environ").read_bytes().split(b"\0")
        if b"=" in item
    )
    return Component(name, argv, os.readlink(proc / "cwd"), env, pid)


class Supervisor:
    def __init__(self, state: Path, cluster_dir: Path) -> None:
        self.state = state
        self.pids_dir = cluster_dir / "pids"
        self.logs_dir = cluster_dir / "logs"
        self.components: dict[str, Component] = {}
        (state / "hold").mkdir(parents=True, exist_ok=True)

    def record(self, event: str, comp: Component, **extra: object) -> None:
        now = time.time()
        line = {"time": now, "event": event, "component": comp.name, "pid": comp.pid, **extra}
        with (self.state / "events.jsonl").open("a") as f:
            f.write(json.dumps(line) + "\n")
        stamp = time.strftime("%H:%M:%S", time.gmtime(now))
        details = " ".join(f"{k}={v}" for k, v in extra.items())
        with (self.state / "log").open("a") as f:
            f.write(f"[supervise {stamp}] {comp.name} {event} pid={comp.pid} {details}\n")

    def adopt(self) -> None:
        """Record every component kwokctl started, from its pid files."""
        for pid_file in sorted(self.pids_dir.glob("*.pid")):
            pid = int(pid_file.read_text().strip())
            comp = read_component(pid_file.stem, pid)
            self.components[comp.name] = comp
            self.record("adopted", comp, argv=" ".join(comp.argv))

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            comp = next((c for c in self.components.values() if c.pid == pid), None)
            if comp is not None:
                self.exited(comp, status)

    def exited(self, comp: Component, status: int) -> None:
        ran = time.monotonic() - comp.started
        comp.quick_exits = 0 if ran >= STEADY_SECONDS else comp.quick_exits + 1
        n = comp.quick_exits
        delay = 0.0 if n == 0 else min(MAX_BACKOFF, 0.5 * 2 ** (n - 1))
        comp.due = time.monotonic() + delay
        if os.WIFSIGNALED(status):
            how = {"signal": signal.Signals(os.WTERMSIG(status)).name}
        else:
            how = {"code": os.WEXITSTATUS(status)}
        self.record("exited", comp, ran_s=round(ran, 1), restart_in_s=delay, **how)

    def restart_due(self) -> None:
        now = time.monotonic()
        for comp in self.components.values():
            if comp.due is None or comp.due > now or (self.state / "hold" / comp.name).exists():
                continue
            with (self.logs_dir / f"{comp.name}.log").open("ab") as log:
                proc = subprocess.Popen(
                    comp.argv, cwd=comp.cwd, env=comp.env, stdout=log, stderr=log,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                )  # fmt: skip
            comp.pid, comp.started, comp.due = proc.pid, time.monotonic(), None
            (self.pids_dir / f"{comp.name}.pid").write_text(str(proc.pid))
            self.record("restarted", comp)

    def run(self, stopping: list[bool]) -> None:
        while not stopping:
            self.reap()
            self.restart_due()
            time.sleep(POLL)
        self.stop_all()

    def stop_all(self) -> None:
        """SIGTERM every component, SIGKILL what is left after 15 s, and reap them all: the
        supervisor is their parent, so no zombie is left for an init that may not reap."""
        for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
            for comp in self.components.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(comp.pid, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                try:
                    pid, _ = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    return
                if pid == 0:
                    time.sleep(POLL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--cluster-dir", type=Path, required=True)
    parser.add_argument("create", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    create = args.create[1:] if args.create[:1] == ["--"] else args.create
    if not create:
        parser.error("give the create command after --")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("supervise: prctl(PR_SET_CHILD_SUBREAPER) failed", file=sys.stderr)
        return 1
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    sup = Supervisor(args.state, args.cluster_dir)
    rc = subprocess.call(create)
    if rc == 0:
        sup.adopt()
    # written whole under a temporary name, then renamed: cluster.sh and the tests wait for the
    # file to exist and then read it, and a plain write_text is seen empty between its open and
    # its write
    tmp = args.state / "created.tmp"
    tmp.write_text(str(rc))
    os.replace(tmp, args.state / "created")
    if rc != 0:
        return rc
    sup.run(stopping)
    return 0


if __name__ == "__main__":
    sys.exit(main())
