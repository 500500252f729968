"""A remote engine's URL as tabd shows it (messages, tabd/stats, the log): never with its password. No deps."""
from __future__ import annotations

from urllib.parse import urlsplit


def shown_url(url: str) -> str:
    """The URL with its password, if it holds one, written as *** (http://user:***@host)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if not password:
        return url
    netloc = parts.netloc.replace(f":{password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
