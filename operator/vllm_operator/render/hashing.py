"""Stable content hash for the spec-hash label."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

HASH_LENGTH: Final = 16  # 64 bits of sha256: collisions are not a concern, label stays short


def compute_spec_hash(value: Any) -> str:
    """sha256 prefix of the canonical JSON of `value` (sorted keys, no whitespace)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]
