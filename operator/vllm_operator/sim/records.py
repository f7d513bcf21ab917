"""Per-request records of a run as CSV or JSON Lines (`vllm-twin simulate --records`)."""

from __future__ import annotations

import contextlib
import csv
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vllm_operator.sim.runner import RunRecord


def record_row(rec: RunRecord) -> dict[str, Any]:
    """One flat row: the request, its outcome, and its latencies when it completed."""
    row: dict[str, Any] = {
        "request_id": rec.request_id,
        "replica": rec.replica,
        "outcome": rec.outcome,
        "reject_reason": rec.reject_reason,
        "arrival": rec.arrival,
        "prompt_tokens": rec.prompt_tokens,
        "max_tokens": rec.max_tokens,
    }
    r = rec.record
    if r is not None:
        gaps = r.itls
        row.update(
            index=r.index,
            output_tokens=r.output_tokens,
            ttft=r.ttft,
            e2e=r.e2e,
            queue_time=r.queue_time,
            prefill_time=r.prefill_time,
            decode_time=r.decode_time,
            itl_max=max(gaps) if gaps else None,
            preemptions=r.preemptions,
            cached_tokens=r.cached_tokens,
        )
    return row


def write_records(path: Path, records: Sequence[RunRecord]) -> None:
    """CSV when the name ends in .csv, JSON Lines otherwise.

    A file is written beside `path` and renamed into place, so a failed write (a full disk, say)
    leaves neither a half-written file nor a lost previous one; what is not a regular file (a
    pipe, /dev/stdout) is written directly.
    """
    rows = [record_row(r) for r in records]
    as_csv = path.suffix == ".csv"
    if path.exists() and not path.is_file():
        _write(path, rows, as_csv)
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # opened as any file: the umask holds
    try:
        _write(tmp, rows, as_csv)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _write(path: Path, rows: list[dict[str, Any]], as_csv: bool) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        if as_csv:
            fields = list(dict.fromkeys(k for row in rows for k in row))
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
        else:
            f.writelines(json.dumps(row) + "\n" for row in rows)
