"""What a next-edit client does with an edit in Copilot's shape: apply it to its own copy of the text."""
from __future__ import annotations


def apply(text: str, edit: dict) -> str:
    """`text` with the edit's `text` put over its LSP range (lines split on "\\n", characters as code points: the
    tests' texts are ASCII, where they are UTF-16 units too)."""
    lines = text.split("\n")
    r = edit["range"]
    start = sum(len(x) + 1 for x in lines[:r["start"]["line"]]) + r["start"]["character"]
    end = sum(len(x) + 1 for x in lines[:r["end"]["line"]]) + r["end"]["character"]
    return text[:start] + edit["text"] + text[end:]
