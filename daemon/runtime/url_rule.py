"""Which remote engine URLs tabd sends prompts to without being told twice (predictor/backends/urls.py shows a URL).

Prompts are source code. Plain http is fine on loopback (the engine is on this
machine) and nowhere else unless the user says so (--allow-insecure-url); https
is fine anywhere.
"""
from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from tabd.predictor.backends.urls import shown_url

__all__ = ["is_loopback", "in_clear_text", "shown_url"]


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def in_clear_text(url: str) -> bool:
    """True for plain http to a host that is not loopback (another scheme is the backend's to refuse)."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
    except ValueError:
        return False
    return parts.scheme.lower() == "http" and not is_loopback(host)

