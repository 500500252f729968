"""Sessions typed from a diff (`tabd session from-diff OLD NEW`): a person turns each old file into the new one.

Per file, in file order, for each hunk (hunks.py): a pause, the cursor moved to the hunk (a `move` event that
carries `"hunk": n`, the n-th edit of the file: replay's edit user reads edit boundaries from it), the old text
selected and deleted (one change replacing the range with ""), and the new text typed with the typist's rhythm
(typist.py: jittered keys, typos fixed by backspace, pauses at line ends, Enter with auto-indent), in a plain buffer
or through VS Code's auto-closing (vscode_typist.py). The typed document ends equal to the new file; a RuntimeError
says so otherwise.

OLD and NEW are two files or two directories (files paired by relative path). A file only in NEW is opened empty
and typed; a file only in OLD, a binary or non-UTF-8 file is skipped with a note. Line breaks are read as "\\n".
"""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from tabd.daemon.sessions.format import apply_change, position_at
from tabd.daemon.sessions.hunks import Hunk, apply_hunks, hunks
from tabd.daemon.sessions.typist import EDITORS, Typist, TypingStyle, language_of

SELECT_PAUSE = (0.3, 0.9)  # selecting the old text before deleting it


@dataclass(frozen=True)
class FilePair:
    """One file to edit: its text before and after, and the path (the new one) its uri names."""

    path: Path
    old: str
    new: str


def hunk_events(old: str, chosen: Sequence[Hunk], uri: str, language: str, rng: random.Random, style: TypingStyle,
                t0: float = 0.0, editor: str = "plain") -> tuple[list[dict[str, Any]], float]:
    """Events that open `old` and make the hunks in order, then close it; (events, end time)."""
    if editor not in EDITORS:
        raise ValueError(f"unknown editor {editor!r}: use {' or '.join(EDITORS)}")
    events: list[dict[str, Any]] = [{"t": round(t0, 3), "op": "open", "uri": uri, "language": language, "text": old}]
    typed, t = (_vscode if editor == "vscode" else _plain)(old, chosen, uri, rng, style, t0)
    events.extend(typed)
    t += 1.0
    events.append({"t": round(t, 3), "op": "close", "uri": uri})
    expected = apply_hunks(old, chosen)
    if final_text(events, uri) != expected:
        raise RuntimeError(f"{uri}: the typed document is not the new file (a from-diff typist bug)")
    return events, t


def _plain(old: str, chosen: Sequence[Hunk], uri: str, rng: random.Random, style: TypingStyle,
           t0: float) -> tuple[list[dict[str, Any]], float]:
    typist = Typist(uri, rng, style, t0)
    doc, delta = old, 0
    for n, hunk in enumerate(chosen, 1):
        start, end = hunk.start + delta, hunk.end + delta
        typist.wait(rng.uniform(*style.span_pause))
        here = position_at(doc, start)
        typist.move_to(here["line"], here["character"], n)
        if end > start:
            typist.wait(rng.uniform(*SELECT_PAUSE))
            there = position_at(doc, end)
            typist.delete(there["line"], there["character"])
        typist.type_text(hunk.text)
        doc = doc[:start] + hunk.text + doc[end:]
        delta += len(hunk.text) - (hunk.end - hunk.start)
    return typist.events, typist.t


def _vscode(old: str, chosen: Sequence[Hunk], uri: str, rng: random.Random, style: TypingStyle,
            t0: float) -> tuple[list[dict[str, Any]], float]:
    from tabd.daemon.sessions.editor import Buffer, indent_unit
    from tabd.daemon.sessions.vscode_typist import EditorTypist

    buffer = Buffer(old, eol="\n", unit=indent_unit(old))
    # the pause between hunks comes before the move, as in a plain buffer: none again where the typing starts
    typist = EditorTypist(buffer, uri, rng, dataclasses.replace(style, span_pause=(0.0, 0.0)), t0)
    delta = 0
    for n, hunk in enumerate(chosen, 1):
        start, end = hunk.start + delta, hunk.end + delta
        typist.wait(rng.uniform(*style.span_pause))
        buffer.place(start)
        typist.events.append({"t": round(typist.t, 3), "op": "move", "uri": uri, "position": buffer.position(start),
                              "hunk": n})
        if end > start:
            typist.wait(rng.uniform(*SELECT_PAUSE))
            typist.press(lambda: buffer.delete_forward(end - start))
        typist.type_span(start, hunk.text)
        delta += len(hunk.text) - (hunk.end - hunk.start)
    return typist.events, typist.t


def final_text(events: Iterable[dict[str, Any]], uri: str) -> str | None:
    """The text of `uri` just before it is closed (or at the end), replaying the changes."""
    doc: str | None = None
    for e in events:
        if e.get("uri") != uri:
            continue
        if e["op"] == "open":
            doc = e["text"]
        elif e["op"] == "change" and doc is not None:
            doc = e["text"] if e.get("range") is None else apply_change(doc, e["range"], e["text"])
        elif e["op"] == "close":
            return doc
    return doc


# ---------------------------------------------------------------- files


def read_text(path: Path) -> str | None:
    """The file as text with "\\n" line breaks; None when it is binary (a NUL byte) or not UTF-8."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def pair_files(old: str | Path, new: str | Path) -> tuple[list[FilePair], list[str]]:
    """The file pairs of OLD and NEW (two files, or two directories paired by relative path), and notes on what was
    skipped and why. Raises FileNotFoundError/ValueError for paths that cannot be paired at all."""
    old_p, new_p = Path(old), Path(new)
    for p in (old_p, new_p):
        if not p.exists():
            raise FileNotFoundError(f"{p}: no such file or directory")
    if old_p.is_file() and new_p.is_file():
        names = [("", old_p, new_p)]
    elif old_p.is_dir() and new_p.is_dir():
        olds = {p.relative_to(old_p).as_posix() for p in old_p.rglob("*") if p.is_file()}
        news = {p.relative_to(new_p).as_posix() for p in new_p.rglob("*") if p.is_file()}
        names = [(rel, old_p / rel, new_p / rel) for rel in sorted(olds | news)]
    else:
        raise ValueError(f"{old_p} and {new_p}: give two files or two directories")
    pairs: list[FilePair] = []
    notes: list[str] = []
    for rel, o, n in names:
        if not n.exists():
            notes.append(f"{rel}: only in {old_p}, skipped (deleting a whole file is not typing)")
            continue
        new_text = read_text(n)
        old_text = read_text(o) if o.exists() else ""
        if new_text is None or old_text is None:
            notes.append(f"{rel or n}: binary or not UTF-8, skipped")
            continue
        if old_text != new_text:
            pairs.append(FilePair(n, old_text, new_text))
    return pairs, notes


def diff_session(pairs: Sequence[FilePair], seed: int = 0, style: TypingStyle | None = None,
                 editor: str = "vscode") -> tuple[str, list[dict[str, Any]]]:
    """(language, events) of a person typing each pair's diff in turn, deterministic for `seed`."""
    style = style or TypingStyle()
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    languages: list[str] = []
    t = 0.0
    for pair in pairs:
        language = language_of(str(pair.path))
        languages.append(language)
        file_events, t = hunk_events(pair.old, hunks(pair.old, pair.new), pair.path.resolve().as_uri(), language,
                                     rng, style, t, editor)
        events.extend(file_events)
        t += 0.5
    return (languages[0] if languages else "plaintext"), events
