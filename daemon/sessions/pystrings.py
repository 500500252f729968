"""Where Python's strings and comments are, as much as an editor's auto-closing asks: the kind of a character.

VS Code decides "not inside a string" from the token under the character before
the cursor (its TextMate grammar). This is a small scanner that gives the same
answer for ordinary code: short strings end at their quote or at the line's end,
triple-quoted ones run across lines, a backslash escapes the next character, and
`#` outside a string starts a comment that the line's end closes. A string's
quotes are part of the string, as they are of its token.

The state between calls is "" (code) or the delimiter of the open string.
"""
from __future__ import annotations

CODE, STRING, COMMENT = "code", "string", "comment"
_COMMENT = "#"  # internal state: in a comment until the line ends


def scan(state: str, text: str) -> tuple[str, str]:
    """(the state after `text`, the kind of its last character) from `state` at its start.

    With an empty `text` the kind is the state's: a line that starts inside a
    triple-quoted string starts in a string.
    """
    kind = STRING if state and state != _COMMENT else (COMMENT if state else CODE)
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\r\n":
            if state == _COMMENT or len(state) == 1:  # a comment and a short string end with their line
                state = ""
            kind = STRING if state else CODE
            i += 1
        elif state == _COMMENT:
            kind, i = COMMENT, i + 1
        elif state:
            if ch == "\\":
                i += 3 if text.startswith("\r\n", i + 1) else 2
            elif text.startswith(state, i):
                i, state = i + len(state), ""
            else:
                i += 1
            kind = STRING
        elif ch == "#":
            state, kind, i = _COMMENT, COMMENT, i + 1
        elif ch in "'\"":
            state = ch * 3 if text.startswith(ch * 3, i) else ch
            kind, i = STRING, i + len(state)
        else:
            kind, i = CODE, i + 1
    return state, kind


def state_after(state: str, text: str) -> str:
    """The state at the end of `text`, for carrying to the next line."""
    return scan(state, text)[0]
