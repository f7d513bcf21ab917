"""Target URLs for the load generator: loopback only.

The load generator exists to drive twins on this machine. Refusing anything but a loopback host
keeps a typo (or a pasted cluster URL) from sending synthetic load to a real service.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

_LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


def is_loopback_host(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and the name localhost; no DNS lookup is made."""
    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_target(url: str) -> str:
    """Return the base URL without a trailing slash, or raise ValueError saying why not."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"target {url!r}: scheme must be http or https")
    host = parts.hostname
    if not host:
        raise ValueError(f"target {url!r}: no host")
    if not is_loopback_host(host):
        raise ValueError(
            f"target {url!r}: host {host!r} is not a loopback address "
            "(127.0.0.0/8, ::1 or localhost); the load generator only drives local twins"
        )
    try:
        parts.port  # noqa: B018 (urlsplit checks the port only when asked for it)
    except ValueError:
        raise ValueError(f"target {url!r}: the port must be a number in 0-65535") from None
    if parts.query or parts.fragment:
        raise ValueError(f"target {url!r}: no query or fragment allowed")
    return url.rstrip("/")
