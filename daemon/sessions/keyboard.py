"""The person at the keyboard: how fast they type and how often they slip (TypingStyle), and the spans of a file
they retype (Span). Both typists read them (typist.py for a plain buffer, vscode_typist.py through VS Code's rules);
they live here so that neither typist imports the other for them."""
from __future__ import annotations

from dataclasses import dataclass

TYPO_KEYS = "qwertyuiopasdfghjklzxcvbnm"


@dataclass(frozen=True)
class Span:
    """Lines [start, end] (0-based, inclusive) retyped after the end of line start-1."""

    start: int
    end: int
    kind: str  # "body", "block" or "line"


@dataclass(frozen=True)
class TypingStyle:
    cps: float = 8.0            # mean keystrokes per second
    jitter: float = 0.35        # sigma of the log-normal interval factor
    typo_rate: float = 0.02     # per letter typed
    line_pause: tuple[float, float] = (0.3, 1.2)
    span_pause: tuple[float, float] = (1.0, 3.0)
    think_rate: float = 0.02    # chance of a mid-line pause
    think_pause: tuple[float, float] = (0.5, 2.0)
