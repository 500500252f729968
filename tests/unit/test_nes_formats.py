"""The next-edit prompt formats of Sweep's and Zed's models (predictor/prompt/nes_formats.py): the exact prompt each builds
from a rename the user made, and the model's documented answer read back into the window, which the model source
(daemon/edits/model_source.py) turns into the edit the user sees; answers that are not whole windows are none."""
from __future__ import annotations

import asyncio

import pytest

from tabd.daemon.edits.history import DocHistory
from tabd.daemon.edits.model_source import FormatWriter, propose
from tabd.predictor.prompt.edit_prompt import EditPair, line_hunks
from tabd.predictor.prompt.nes_formats import (FORMATS, NAMES, SWEEP, TABD, ZETA, EditContext, format_named, original_window,
                                        unified_diff)

BEFORE = "import os\n\ndef size(n):\n    total = n + 1\n    return n\n"
TEXT = BEFORE.replace("(n)", "(count)")  # the user renamed the parameter
CURSOR = TEXT.index("(count)") + len("(count")  # at the end of the new name
EDIT = EditPair(2, "def size(n):\n", "def size(count):\n")
LAST = (TEXT.index("count"), TEXT.index("count") + 5, "n")
CTX = EditContext("size.py", TEXT, CURSOR, [EDIT], LAST)
RENAMED = TEXT.replace("n + 1", "count + 1").replace("return n", "return count")

SWEEP_PROMPT = """<|file_sep|>size.py.diff
original:
def size(n):
updated:
def size(count):
<|file_sep|>original/size.py
import os

def size(n):
    total = n + 1
    return n
<|file_sep|>current/size.py
import os

def size(count):
    total = n + 1
    return n
<|file_sep|>updated/size.py
"""

ZETA_PROMPT = """### Instruction:
You are a code completion assistant and your task is to analyze user edits and then rewrite an excerpt that the user \
provides, suggesting the appropriate edits within the excerpt, taking into account the cursor location.

### User Edits:

User edited size.py:
```diff
@@ -3,1 +3,1 @@
-def size(n):
+def size(count):
```

### User Excerpt:

```size.py
<|start_of_file|>
<|editable_region_start|>
import os

def size(count<|user_cursor_is_here|>):
    total = n + 1
    return n
<|editable_region_end|>
```

### Response:
"""


def test_the_names_and_the_setting_s_choices_agree():
    from tabd.daemon.runtime.settings import BY_NAME

    assert NAMES == tuple(FORMATS) == BY_NAME["edit_format"].spec.choices
    assert format_named("sweep") is SWEEP
    with pytest.raises(ValueError, match="known: tabd, sweep, zeta"):
        format_named("instinct")


def test_sweep_prompt_shows_the_edit_the_window_before_it_and_now_then_asks_for_the_update():
    win = SWEEP.window(TEXT, CURSOR)
    assert SWEEP.prompt(CTX, win) == SWEEP_PROMPT
    assert SWEEP.stops == ("<|file_sep|>", "</s>") and SWEEP.plain
    # its window: 10 lines above the cursor's line and 10 below (Sweep's 21 lines)
    long = "".join(f"x{i} = {i}\n" for i in range(40))
    w = SWEEP.window(long, long.index("x20"))
    assert (w.first_line, w.end_line) == (10, 31)


def test_sweep_s_answer_reads_back_into_the_window_and_a_cut_one_is_none():
    win = SWEEP.window(TEXT, CURSOR)
    # the model writes the updated window and then the next block's separator (or the engine stopped there)
    assert SWEEP.read(win, RENAMED + "<|file_sep|>") == RENAMED
    assert SWEEP.read(win, RENAMED) == RENAMED
    assert SWEEP.read(win, RENAMED[:-5]) is None  # cut inside a line: the budget ran out


def test_sweep_s_original_window_is_the_current_one_when_the_last_edit_lies_outside_it():
    win = SWEEP.window(TEXT, CURSOR)
    assert original_window(CTX, win) == BEFORE
    outside = EditContext("size.py", TEXT, CURSOR, [EDIT], (len(TEXT) + 10, len(TEXT) + 12, "zz"))
    assert original_window(outside, win) == TEXT


def test_zeta_prompt_marks_the_region_and_the_cursor_and_shows_the_edit_as_a_diff():
    win = ZETA.window(TEXT, CURSOR)
    assert ZETA.prompt(CTX, win) == ZETA_PROMPT
    assert ZETA.stops == ("<|editable_region_end|>",) and ZETA.plain
    assert unified_diff(EditPair(4, "", "    x = 1\n")) == "@@ -5,0 +5,1 @@\n+    x = 1"


def test_zeta_excerpt_has_context_lines_around_the_region_and_no_start_of_file_mark_past_the_top():
    long = "".join(f"x{i} = {i}\n" for i in range(40))
    cursor = long.index("x20")
    ctx = EditContext("long.py", long, cursor)
    prompt = ZETA.prompt(ctx, ZETA.window(long, cursor))
    excerpt = prompt.split("### User Excerpt:\n\n", 1)[1]
    assert excerpt.startswith("```long.py\nx10 = 10\n") and "<|start_of_file|>" not in excerpt
    assert "x14 = 14\n<|editable_region_start|>\nx15 = 15\n" in excerpt
    assert "<|user_cursor_is_here|>x20 = 20\n" in excerpt
    assert "x25 = 25\n<|editable_region_end|>\nx26 = 26\n" in excerpt
    assert excerpt.endswith("x30 = 30\n```\n\n### Response:\n")


def test_zeta_s_answer_reads_back_with_or_without_its_end_marker():
    win = ZETA.window(TEXT, CURSOR)
    region = RENAMED.replace("def size(count)", "def size(count<|user_cursor_is_here|>)")
    full = f"```size.py\n<|start_of_file|>\n<|editable_region_start|>\n{region}<|editable_region_end|>\n```"
    assert ZETA.read(win, full) == RENAMED
    stopped = f"```size.py\n<|editable_region_start|>\n{region}"  # the engine stopped at the end marker, dropping it
    assert ZETA.read(win, stopped) == RENAMED
    assert ZETA.read(win, stopped[:-4]) is None  # cut mid-line by the budget
    assert ZETA.read(win, RENAMED) is None  # no start marker: not an answer in this format


@pytest.mark.parametrize("fmt", [SWEEP, ZETA], ids=lambda f: f.name)
def test_a_window_written_unchanged_is_no_edit_and_budgets_cover_the_window(fmt):
    win = fmt.window(TEXT, CURSOR)
    same = fmt.read(win, win.text if fmt is SWEEP else f"```size.py\n<|editable_region_start|>\n{win.text}")
    assert same == win.text and line_hunks(win.text, same) == []
    assert fmt.budget(win) * 2.5 > len(win.text)


def history() -> DocHistory:
    h = DocHistory()
    h.edited(BEFORE.index("(n)") + 1, "n", "count", 0.0)
    return h


@pytest.mark.parametrize("fmt", [SWEEP, ZETA], ids=lambda f: f.name)
def test_the_model_source_asks_in_the_writer_s_format_and_proposes_the_edits_its_answer_implies(fmt):
    asked = []

    async def write(doc, prompt, budget, background, got_fmt):
        asked.append((prompt, budget, got_fmt))
        answer = RENAMED + "<|file_sep|>" if fmt is SWEEP else f"```size.py\n<|editable_region_start|>\n{RENAMED}"
        return answer, ()

    edits = asyncio.run(propose(FormatWriter(fmt, write), "d", "w/size.py", TEXT, CURSOR, list(history().groups),
                                0.5, False))
    assert asked[0][0] == (SWEEP_PROMPT if fmt is SWEEP else ZETA_PROMPT) and asked[0][2] is fmt
    assert TEXT[:edits[0].start].endswith("total = ")  # the nearest to the cursor first
    text = TEXT
    for e in edits:  # Tab, Tab: each in the text the one before leaves
        assert (text[e.start:e.end], e.text) == ("n", "count")
        text = text[:e.start] + e.text + text[e.end:]
    assert text == RENAMED


def test_a_plain_writer_is_asked_in_tabd_s_own_format():
    asked = []

    async def writer(doc, prompt, budget, background):
        asked.append(prompt)
        return None

    asyncio.run(propose(writer, "d", "size.py", TEXT, CURSOR, list(history().groups), 0.5, False))
    assert asked == [TABD.prompt(CTX, TABD.window(TEXT, CURSOR))] and asked[0].startswith("<<< edits: size.py\n")
