"""The next-edit prompt formats a remote engine may serve (`tabd serve --edit-format tabd|sweep|zeta`): for each, the
prompt built from the file's name, the user's recent edits, the lines around the cursor and (optionally) other files,
and the model's answer read back into the rewritten window. The daemon diffs that against the window as it is
(edit_prompt.line_hunks / narrowed) into the edits it shows, whatever the format.

  tabd   tabd's own layout (predictor/prompt/edit_prompt.py), which the embedded model is trained on; sent as the prefix of
         a FIM request with an empty suffix, as before.
  sweep  Sweep's next-edit models (sweepai/sweep-next-edit-1.5B and -0.5B), a plain completion:
             <|file_sep|>{other file}            (optional, each)
             {its text}
             <|file_sep|>{path}.diff             (each recent edit, oldest first)
             original:
             {the lines before}
             updated:
             {the lines after}
             <|file_sep|>original/{path}
             {the window as it was before the last edit}
             <|file_sep|>current/{path}
             {the window now}
             <|file_sep|>updated/{path}
         and the model writes the window as it will be, ending at the next `<|file_sep|>` or `</s>` (the stops).
         Sources: https://huggingface.co/sweepai/sweep-next-edit-1.5B (the model card: file context, recent diffs,
         original/current/updated), https://blog.sweep.dev/posts/oss-next-edit ("Our Format", the 21-line window:
         10 lines above the cursor's line and 10 below), and Zed's self-hosted Sweep support
         (https://github.com/zed-industries/zed/pull/51139, crates/edit_prediction/src/sweep_prompt.rs), which
         agrees on the layout and the two stop strings.
  zeta   Zed's Zeta (zed-industries/zeta, Qwen2.5-Coder-7B tuned), a plain completion:
             ### Instruction:
             You are a code completion assistant and your task is ... taking into account the cursor location.

             ### User Edits:

             User edited {path}:
             ```diff
             @@ -L,n +L,m @@
             -old line
             +new line
             ```                                 (each recent edit, oldest first, a blank line between)

             ### User Excerpt:

             ```{path}
             <|start_of_file|>                   (only when the excerpt starts at the file's first line)
             {context lines above}
             <|editable_region_start|>
             {editable lines, with <|user_cursor_is_here|> at the cursor}
             <|editable_region_end|>
             {context lines below}
             ```

             ### Response:
         and the model writes the excerpt again (```{path}, the start marker, the rewritten region); it stops at
         `<|editable_region_end|>`. Sources: https://huggingface.co/zed-industries/zeta and its data set card
         https://huggingface.co/datasets/zed-industries/zeta (the instruction, the three sections, the markers),
         Zed's crates/zeta/src/zeta1.rs and zeta1/input_excerpt.rs (how an edit and the excerpt are laid out, and
         that the answer is read between the start marker's line and the end marker, cursor marker dropped).

Details the sources leave open, chosen here: Sweep's original window is the current one when the last edit is not
wholly inside it; Zeta's editable region is a fixed line window (5 lines above the cursor's line, 5 below; Zed grows
it along the syntax tree) with 5 context lines on each side, its edits' hunk headers give the edit's first line
(1-based, in the current text) on both sides, with no context lines, and the prompt ends with "### Response:" and
one newline; Zeta's engine is stopped at the end marker (the context and fence the model would write after it are
not read). Sweep's 1.5B and 0.5B prompts have no cursor mark; the later sweep-next-edit-v2-7B card adds `<|cursor|>`
and line spans to the headers, which this format does not write. Budgets: about 2.5 characters a token over the
rewritten text, and room for an edit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from tabd.predictor.prompt.edit_prompt import EditPair, Window, answer_budget, edit_prompt, line_starts, read_answer, window

NAMES = ("tabd", "sweep", "zeta")

SWEEP_SEP = "<|file_sep|>"
SWEEP_STOPS = (SWEEP_SEP, "</s>")
SWEEP_BEFORE, SWEEP_AFTER = 10, 10  # Sweep's 21-line window

MAX_EDITS = 3  # recent edits shown, newest kept (as tabd's own prompt, and Zed's Sweep prompt)
MAX_EDIT_LINES = 40  # lines of one edit shown per side (chosen, as Zed's Sweep prompt); a bigger edit keeps its first

ZETA_START = "<|editable_region_start|>"
ZETA_END = "<|editable_region_end|>"
ZETA_CURSOR = "<|user_cursor_is_here|>"
ZETA_FILE_START = "<|start_of_file|>"
ZETA_BEFORE, ZETA_AFTER = 5, 5  # the editable region around the cursor's line (chosen)
ZETA_CONTEXT = 5  # lines of read-only context on each side of it (chosen)
ZETA_INSTRUCTION = (
    "### Instruction:\n"
    "You are a code completion assistant and your task is to analyze user edits and then rewrite an excerpt that the "
    "user provides, suggesting the appropriate edits within the excerpt, taking into account the cursor location.\n\n")


@dataclass(frozen=True)
class EditContext:
    """What a next-edit prompt may show: the file's name, its text, the cursor (an offset), the recent edits as
    whole-line pairs (oldest first), the last edit as (start, end, old text) in the current text (the region it
    left and what that region held), and other files as (path, text)."""

    path: str
    text: str
    cursor: int
    edits: Sequence[EditPair] = ()
    last: tuple[int, int, str] | None = None
    others: Sequence[tuple[str, str]] = field(default_factory=tuple)


@dataclass(frozen=True)
class NesFormat:
    """One format: the window it rewrites, its prompt, how its answer reads back into that window (None: no
    answer), the tokens the answer may take, the engine's stop strings, and whether the prompt is sent as it is
    (a plain completion) rather than as the prefix of a FIM request."""

    name: str
    window: Callable[[str, int], Window]
    prompt: Callable[[EditContext, Window], str]
    read: Callable[[Window, str], str | None]
    budget: Callable[[Window], int]
    stops: tuple[str, ...] = ()
    plain: bool = False


# -- tabd's own --------------------------------------------------------------------------------


def _tabd_prompt(ctx: EditContext, win: Window) -> str:
    return edit_prompt(ctx.path.rsplit("/", 1)[-1], ctx.edits, win)


TABD = NesFormat("tabd", window, _tabd_prompt, read_answer, answer_budget)


def recent(edits: Sequence[EditPair]) -> list[EditPair]:
    """The edits a prompt shows: the newest MAX_EDITS, each side cut to its first MAX_EDIT_LINES lines."""
    def cut(side: str) -> str:
        return "".join(side.splitlines(keepends=True)[:MAX_EDIT_LINES])
    return [EditPair(e.line, cut(e.old), cut(e.new)) for e in list(edits)[-MAX_EDITS:]]


# -- Sweep -------------------------------------------------------------------------------------


def _ended(lines: str) -> str:
    return lines if lines.endswith("\n") or not lines else lines + "\n"  # the file's last line has no newline


def _block(path: str, body: str) -> str:
    return f"{SWEEP_SEP}{path}\n{body}" + ("" if body.endswith("\n") or not body else "\n")


def original_window(ctx: EditContext, win: Window) -> str:
    """The window's lines as they were before the last edit (the current ones when it is not wholly inside)."""
    if ctx.last is None:
        return win.text
    start, end, old = ctx.last
    if not (win.start <= start and end <= win.end):
        return win.text
    body = ctx.text[win.start:start] + old + ctx.text[end:win.end]
    return body if body.endswith("\n") else body + "\n"


def sweep_prompt(ctx: EditContext, win: Window) -> str:
    parts = [_block(path, text) for path, text in ctx.others]
    for e in recent(ctx.edits):
        parts.append(_block(f"{ctx.path}.diff", f"original:\n{_ended(e.old)}updated:\n{e.new}"))
    parts.append(_block(f"original/{ctx.path}", original_window(ctx, win)))
    parts.append(_block(f"current/{ctx.path}", win.text))
    parts.append(f"{SWEEP_SEP}updated/{ctx.path}\n")
    return "".join(parts)


def sweep_read(win: Window, written: str) -> str | None:
    """The updated window: the text before a stop (the engine usually strips it), whole lines only."""
    for stop in SWEEP_STOPS:
        written = written.split(stop, 1)[0]
    return read_answer(win, written)


def _rewrite_budget(win: Window) -> int:
    # a window written back whole, and room for an edit; the prompt's lines are not cut, so the raw text counts
    return int(len(win.text) / 2.5) + 64


def _sweep_window(text: str, cursor: int) -> Window:
    return window(text, cursor, SWEEP_BEFORE, SWEEP_AFTER)


SWEEP = NesFormat("sweep", _sweep_window, sweep_prompt, sweep_read, _rewrite_budget, SWEEP_STOPS, plain=True)


# -- Zeta --------------------------------------------------------------------------------------


def unified_diff(e: EditPair) -> str:
    """One edit as a unified diff hunk with no context lines (1-based line numbers; chosen: the edit's first line
    in the current text on both sides), no final newline."""
    old, new = e.old.splitlines(), e.new.splitlines()
    head = f"@@ -{e.line + 1},{len(old)} +{e.line + 1},{len(new)} @@"
    return "\n".join([head] + ["-" + ln for ln in old] + ["+" + ln for ln in new])


def zeta_events(path: str, edits: Sequence[EditPair]) -> str:
    return "\n\n".join(f"User edited {path}:\n```diff\n{unified_diff(e)}\n```" for e in recent(edits))


def zeta_excerpt(ctx: EditContext, win: Window) -> str:
    """The excerpt: context lines, the editable region (the window) with the cursor marked, context lines."""
    starts = line_starts(ctx.text)
    lines = len(starts) - (1 if starts[-1] == len(ctx.text) and len(starts) > 1 else 0)  # a final newline ends the last
    first = max(0, win.first_line - ZETA_CONTEXT)
    last = min(lines, win.end_line + ZETA_CONTEXT)
    above = ctx.text[starts[first]:win.start]
    below = ctx.text[win.end:starts[last] if last < len(starts) else len(ctx.text)]
    region = win.text[:-1]  # the window's lines without the newline that ends the last (the end marker's line)
    cursor = min(max(ctx.cursor - win.start, 0), len(region))
    out = f"```{ctx.path}\n" + (f"{ZETA_FILE_START}\n" if first == 0 else "") + above
    out += f"{ZETA_START}\n{region[:cursor]}{ZETA_CURSOR}{region[cursor:]}\n{ZETA_END}"
    if below:
        out += "\n" + (below[:-1] if below.endswith("\n") else below)
    return out + "\n```"


def zeta_prompt(ctx: EditContext, win: Window) -> str:
    return (f"{ZETA_INSTRUCTION}### User Edits:\n\n{zeta_events(ctx.path, ctx.edits)}\n\n"
            f"### User Excerpt:\n\n{zeta_excerpt(ctx, win)}\n\n### Response:\n")


def zeta_read(win: Window, written: str) -> str | None:
    """The region the model rewrote: the lines after the start marker's line, up to the end marker (or the end of
    the text, where the engine stopped on it and left it out), the cursor marker dropped; None without exactly one
    start marker."""
    written = written.replace(ZETA_CURSOR, "")
    if written.count(ZETA_START) != 1 or written.count(ZETA_END) > 1:
        return None
    after = written.split(ZETA_START, 1)[1]
    newline = after.find("\n")
    if newline < 0:
        return None
    region = after[newline + 1:]
    if ZETA_END in region:
        region = region.split(ZETA_END, 1)[0]
    elif not region.endswith("\n"):
        return None  # cut before the region's end (the budget): no answer
    region = region.replace(ZETA_FILE_START + "\n", "")
    return read_answer(win, region if region.endswith("\n") else region + "\n")


def _zeta_window(text: str, cursor: int) -> Window:
    return window(text, cursor, ZETA_BEFORE, ZETA_AFTER)


ZETA = NesFormat("zeta", _zeta_window, zeta_prompt, zeta_read, _rewrite_budget, (ZETA_END,), plain=True)

FORMATS: dict[str, NesFormat] = {f.name: f for f in (TABD, SWEEP, ZETA)}


def format_named(name: str) -> NesFormat:
    """The format of that name; ValueError naming the known ones otherwise."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown edit format {name!r}; known: {', '.join(NAMES)}") from None


__all__ = ["EditContext", "FORMATS", "NAMES", "NesFormat", "SWEEP", "TABD", "ZETA", "format_named"]
