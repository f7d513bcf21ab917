"""Is a rendered manifest already in force? (pure)

Server-side apply of an unchanged object is a no-op for the object but still an API write, and a
thousand of them per resync is load for nothing. So the reconcile applies only when some field of
the desired manifest differs from the observed object. The observed object carries defaults the
server added; they do not count as drift, because we do not own them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def is_applied(desired: Any, observed: Any) -> bool:
    """True when every field of `desired` has the same value in `observed`."""
    if isinstance(desired, dict):
        return isinstance(observed, dict) and all(
            key in observed and is_applied(value, observed[key]) for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(observed, list)
            and len(desired) == len(observed)
            and all(is_applied(d, o) for d, o in zip(desired, observed, strict=True))
        )
    if isinstance(desired, bool) or isinstance(observed, bool):
        return desired is observed
    if isinstance(desired, int | float) and isinstance(observed, int | float):
        return float(desired) == float(observed)
    return bool(desired == observed) or str(desired) == str(observed)


def stamp_applied_hash(manifest: dict[str, Any], annotation: str) -> dict[str, Any]:
    """`manifest` with a hash of itself in `annotation`.

    Field-by-field comparison cannot see a field that the desired manifest *dropped*; the hash
    can, so a removed flag or selector still leads to an apply (which prunes it under SSA).
    """
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]
    meta = dict(manifest["metadata"])
    meta["annotations"] = {**meta.get("annotations", {}), annotation: digest}
    return {**manifest, "metadata": meta}
