"""`vllm-twin twin MODEL [vllm serve flags]`: the vLLM 0.33 twin as a local HTTP server.

It takes a pod's container args unchanged (`vllm serve`'s argv), simulates the engine, and serves
vLLM's HTTP surface on a loopback address. Exit codes follow vLLM: 2 for a command line argparse
refuses, 1 for a configuration the engine refuses at startup (vLLM's ValueError message), before
anything listens. `python -m vllm_twin.commands.twin ARGS` does the same without the
`vllm-operator` wrapper, which matters when the first arg is a flag (`--model X`).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence

from aiohttp import web

from vllm_twin.argv import ArgvError, TwinArgs, format_argv_error, parse_vllm_argv
from vllm_twin.server.app import build_app, start_server
from vllm_twin.server.setup import EngineSetup, TwinSetupError, build_engine, serve_options_from
from vllm_twin.server.state import STATE, VLLM_VERSION

NAME = "twin"
HELP = "Run a simulated vLLM 0.33 server on 127.0.0.1 with `vllm serve` arguments."
LOOPBACK = "127.0.0.1"

log = logging.getLogger("vllm_twin")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "vllm_args",
        nargs=argparse.REMAINDER,
        help="MODEL and `vllm serve` flags; start with `--` when the first one is a flag",
    )


def run(args: argparse.Namespace) -> int:
    argv = list(args.vllm_args)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    return main(argv)


def choose_host(requested: str | None) -> tuple[str, str | None]:
    """The address to bind and, when it differs from the request, why.

    vLLM binds every interface by default; the twin only ever binds loopback, so that no test
    twin is reachable from outside this machine.
    """
    if requested is None:
        return LOOPBACK, None
    if requested == "localhost":
        return LOOPBACK, None
    try:
        if ipaddress.ip_address(requested.strip("[]")).is_loopback:
            return requested.strip("[]"), None
    except ValueError:
        pass
    return LOOPBACK, f"--host {requested} ignored: the twin binds {LOOPBACK} only"


MAX_PORT = 65535


def main(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    try:
        targs = parse_vllm_argv(argv, os.environ if env is None else env)
    except ArgvError as exc:
        sys.stderr.write(format_argv_error(str(exc)))
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for flag in targs.unmodelled:
        log.warning("%s is accepted as vLLM does, but the twin does not model its effect", flag)
    try:
        setup = build_engine(targs)
    except TwinSetupError as exc:
        sys.stderr.write(f"vllm twin: error: {exc}\n")
        return 2
    except ValueError as exc:  # vLLM's own startup validation, with its message
        sys.stderr.write(f"ValueError: {exc}\n")
        return 1
    host, note = choose_host(targs.host)
    if note:
        log.warning(note)
    if targs.shutdown_timeout < 0:  # VllmConfig's ge=0 (vllm/config/vllm.py)
        sys.stderr.write("ValueError: shutdown_timeout must be >= 0\n")
        return 1
    if not 0 <= targs.port <= MAX_PORT:
        sys.stderr.write(f"vllm twin: error: --port must be in [0, {MAX_PORT}], got {targs.port}\n")
        return 2
    try:
        asyncio.run(_serve(targs, setup, host))
    except OSError as exc:  # the port is taken, or not ours to bind
        reason = exc.strerror or str(exc)
        sys.stderr.write(f"vllm twin: error: cannot listen on {host}:{targs.port}: {reason}\n")
        return 2
    return 0


async def _serve(targs: TwinArgs, setup: EngineSetup, host: str) -> None:
    app: web.Application = build_app(setup.engine, serve_options_from(targs))
    runner, port = await start_server(app, host, targs.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # the one line a launcher waits for; the port is the bound one (useful with --port 0)
    print(
        f"vLLM twin {VLLM_VERSION} ready on http://{host}:{port} "
        f"(model {targs.model_name}, {setup.describe()}, time scale {targs.time_scale:g})",
        flush=True,
    )
    try:
        await stop.wait()
        # vLLM's SIGTERM: drain for --shutdown-timeout, then stop listening (docs/rollouts.md)
        mode = "drain" if targs.shutdown_timeout else "abort"
        driver = app[STATE].driver
        log.info(
            "shutdown: mode=%s timeout=%ss, %d requests in flight",
            mode, targs.shutdown_timeout, driver.active,
        )  # fmt: skip
        cut = await driver.drain(targs.shutdown_timeout)
        log.info("shutdown: %d in-flight requests aborted", cut)
    finally:
        await runner.cleanup()
    log.info("shut down")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
