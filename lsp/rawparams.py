"""LSP params read as plain JSON for the hot path: checked and converted without lsprotocol or cattrs.

A keystroke's didChange, a Tab's tabd.accept and the inline completion after it
are answered from the decoded JSON (TabdProtocol.dispatch). Measured on the
replay's after-accept round trip, structuring those three messages through
cattrs and pygls' handler machinery cost more than the answer itself (README,
"Speculation that follows what you accept"). Each reader here returns None for
anything it does not fully understand; the message then takes the normal,
structured path, which answers or reports it as before, so a malformed message
meets exactly the errors it met without this module.
"""
from __future__ import annotations

from typing import Any, TypeGuard

UINT_MAX = 2**31 - 1  # LSP's uinteger (lsprotocol rejects larger)

Position = tuple[int, int]
# one content change: ((start, end) or None for the whole document, new text)
Change = tuple["tuple[Position, Position] | None", str]


def uinteger(value: object) -> TypeGuard[int]:
    return type(value) is int and 0 <= value <= UINT_MAX


def position(value: object) -> Position | None:
    """(line, character) of an LSP Position object, or None."""
    if type(value) is not dict:
        return None
    line, character = value.get("line"), value.get("character")
    return (line, character) if uinteger(line) and uinteger(character) else None


def span(value: object) -> tuple[Position, Position] | None:
    """(start, end) of an LSP Range object, or None."""
    if type(value) is not dict:
        return None
    start, end = position(value.get("start")), position(value.get("end"))
    return (start, end) if start is not None and end is not None else None


def document_uri(params: object) -> str | None:
    """params.textDocument.uri, or None."""
    doc = params.get("textDocument") if type(params) is dict else None
    uri = doc.get("uri") if type(doc) is dict else None
    return uri if type(uri) is str else None


def did_change(params: object) -> tuple[str, int, list[Change]] | None:
    """(uri, version, changes) of didChange params, or None."""
    uri = document_uri(params)
    if uri is None or type(params) is not dict:
        return None
    version = params["textDocument"].get("version")
    changes = params.get("contentChanges")
    if type(version) is not int or type(changes) is not list or not -UINT_MAX - 1 <= version <= UINT_MAX:
        return None
    out: list[Change] = []
    for change in changes:
        if type(change) is not dict or type(change.get("text")) is not str:
            return None
        if "range" in change:
            rng = span(change["range"])
            length = change.get("rangeLength")
            if rng is None or not (length is None or uinteger(length)):
                return None
            out.append((rng, change["text"]))
        else:
            out.append((None, change["text"]))
    return uri, version, out


def did_open(params: object) -> tuple[str, int, str, str] | None:
    """(uri, version, languageId, text) of didOpen params, or None. The structured path is no fallback here: its
    structuring turns a text of null, 5 or {"a": 1} into the strings "None", "5", "{'a': 1}"."""
    doc = params.get("textDocument") if type(params) is dict else None
    if type(doc) is not dict:
        return None
    uri, version, language, text = doc.get("uri"), doc.get("version"), doc.get("languageId", ""), doc.get("text")
    if type(uri) is not str or type(text) is not str or type(language) is not str or type(version) is not int:
        return None
    return (uri, version, language, text) if -UINT_MAX - 1 <= version <= UINT_MAX else None


def texts_are_strings(params: object) -> bool:
    """Whether every content change of didChange params that has a text has a string (see did_open for why)."""
    changes = params.get("contentChanges") if type(params) is dict else None
    if type(changes) is not list:
        return True  # not this check's to judge: the structured path reports it
    return all(type(c) is not dict or "text" not in c or type(c["text"]) is str for c in changes)


def inline_completion(params: object) -> tuple[str, Position, bool] | None:
    """(uri, (line, character), invoked) of inlineCompletion params, or None. A missing context is an automatic
    request, as the memory path has always taken it."""
    uri = document_uri(params)
    if uri is None or type(params) is not dict:
        return None
    at = position(params.get("position"))
    context = params.get("context") or {} if at is not None else None
    if at is None or type(context) is not dict:
        return None
    return uri, at, bool(context.get("triggerKind") == 1)  # InlineCompletionTriggerKind.Invoked


def command(params: object) -> tuple[str, list[Any]] | None:
    """(command, arguments) of workspace/executeCommand params, or None."""
    if type(params) is not dict or type(params.get("command")) is not str:
        return None
    arguments = params.get("arguments", [])
    if arguments is None:
        arguments = []
    return (params["command"], arguments) if type(arguments) is list else None
