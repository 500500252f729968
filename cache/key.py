"""The cache key: a digest of exactly what decides the model's output."""
from __future__ import annotations

import hashlib

from tabd.cache.state import Window


def state_key(model_id: str, settings: str, window: Window, context: str = "") -> str:
    """Same key, same answer: model id, generation settings, the workspace context's digest and the prompt window."""
    h = hashlib.blake2b(digest_size=16)
    for part in (model_id, settings, context, window.prefix, window.suffix):
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def short_key(key: str) -> str:
    """The key as written to logs: short, and no source text."""
    return key[:12]
