"""What every LSP handler reads the same way: a document's short id, a command's arguments, a URI's path.

Plain functions both the completion handlers (server.py) and the next-edit ones (inline_edit.py) import, so neither
imports the other.
"""
from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import unquote, urlparse

from pygls.exceptions import JsonRpcInvalidParams

MAX_ACCEPT_CHARS = 1 << 20  # tabd.accept's chars: more than any suggestion has
MAX_ID_CHARS = 256  # an item id tabd made is 12 characters


def doc_id(uri: str) -> str:
    """A short hash of the URI: what logs and slots use, so no path leaks into a log."""
    return hashlib.blake2b(uri.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def fs_path(uri: str) -> str:
    """The filesystem path of a file: URI ("" for another scheme)."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else ""


def command_args(args: tuple[Any, ...], name: str) -> tuple[str, dict[str, Any]]:
    """(item id, options) from a command's arguments, however the client wrapped them."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)) and not isinstance(args[0], str):
        args = tuple(args[0])
    if not args or not isinstance(args[0], (str, int)) or isinstance(args[0], bool):
        raise JsonRpcInvalidParams(f"{name} expects [itemId, {{chars, partial}}?]")
    options = args[1] if len(args) > 1 else {}
    if hasattr(options, "_asdict"):
        options = options._asdict()
    if not isinstance(options, dict):
        raise JsonRpcInvalidParams(f"{name}: second argument must be an object")
    chars = options.get("chars")
    if chars is not None and (not is_int(chars) or not 0 <= chars <= MAX_ACCEPT_CHARS):
        raise JsonRpcInvalidParams(f"{name}: chars must be an integer from 0 to {MAX_ACCEPT_CHARS}")
    if isinstance(args[0], str) and len(args[0]) > MAX_ID_CHARS:
        raise JsonRpcInvalidParams(f"{name}: the item id is longer than {MAX_ID_CHARS} characters")
    return str(args[0]), options


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def plain(value: Any) -> Any:
    """Params or a result as plain dicts and lists (pygls gives an unknown method's params as namedtuples)."""
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
