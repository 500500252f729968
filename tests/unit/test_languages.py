"""The document's language at work (daemon/context/languages.py): the comment that heads its context chunks and where
a multi-line suggestion may start; an unknown languageId falls back, never fails."""
from __future__ import annotations

import pytest

from tabd.cache.state import DocState
from tabd.daemon.context.chunk_store import ContextOptions, ContextStore
from tabd.daemon.context.languages import block_openers, comment_of, language_of
from tabd.daemon.runtime.jobs import chunks_of
from tabd.predictor.prompt.fim import chunk_text
from tabd.predictor.text.postprocess import wants_multiline
from tabd.predictor.prompt.prompt_text import fim_prompt, split_context
from tabd.predictor.prompt.templates import template_for
from tabd.predictor.types import ContextChunk


@pytest.mark.parametrize("language, path, comment", [
    ("python", "a.py", "#"), ("shellscript", "run.sh", "#"), ("ruby", "x.rb", "#"),
    ("javascript", "a.js", "//"), ("typescript", "a.ts", "//"), ("go", "main.go", "//"), ("rust", "lib.rs", "//"),
    ("c", "x.c", "//"), ("java", "A.java", "//"), ("lua", "init.lua", "--"), ("sql", "q.sql", "--"),
    ("TypeScript", "a.ts", "//"),  # as an editor may spell it
    ("no-such-language", "src/app.tsx", "//"), ("", "main.go", "//"), ("", "query.SQL", "--"),  # by the extension
    ("no-such-language", "notes.txt", "#"), ("", "", "#"), (None, "a.lua", "--"),  # unknown: Python's
])
def test_the_comment_that_heads_a_context_chunk(language, path, comment):
    assert comment_of(language, path) == comment


def test_brace_languages_open_blocks_with_a_brace_and_the_rest_with_a_colon():
    assert block_openers("python", "a.py") == (":",)
    assert block_openers("typescript", "a.ts") == ("{",) == block_openers("", "main.rs") == block_openers("go")
    assert block_openers("klingon", "x.unknown") == (":",)
    assert language_of("klingon", "x.unknown") == ""


def test_a_multi_line_suggestion_may_start_after_the_language_s_opener():
    # the cursor on an empty, unindented line under the line that opens a block
    assert wants_multiline("", "", "def main():", block_openers("python"))
    assert not wants_multiline("", "", "function main() {", block_openers("python"))
    assert wants_multiline("", "", "function main() {", block_openers("javascript"))
    assert not wants_multiline("", "", "case 1:", block_openers("go"))
    assert wants_multiline("", "", "def main():")  # the default is Python's
    assert not wants_multiline("x", "", "function main() {", block_openers("javascript"))  # not an empty line


def test_context_chunks_are_headed_in_their_own_language_and_parse_back():
    store = ContextStore(ContextOptions(tokens=400, max_chunks=16, max_bytes=1 << 16, chunk_lines=8, idle_ms=100))
    store.open("ts", "src/util.ts", "export function parseConfig(text: string) {\n  return JSON.parse(text)\n}\n",
               comment_of("typescript", "src/util.ts"))
    # a document whose language nothing says (it may read any family; `#` by default) reads the TypeScript chunk
    store.open("py", "scratch", "import json\n\n", comment_of("", "scratch"))
    prefix = "import json\n\nconfig = parseConfig(text)\n"
    snap = store.select("py", len(prefix), prefix, "", 0)
    chunks = [c for c in chunks_of(snap) if not c.lookup_only]
    assert [(c.path, c.comment) for c in chunks if c.path == "src/util.ts"] == [("src/util.ts", "//")]
    assert chunk_text(chunks[0]).startswith("// src/util.ts\n")
    template = template_for("tabd", "spm")
    for comment in ("#", "//", "--"):
        sent = [ContextChunk("lib/x", "x = 1\n", comment=comment)]
        parsed, rest = split_context(template, fim_prompt(template, "a", "b", sent))
        assert parsed == sent and rest == fim_prompt(template, "a", "b")


def test_the_same_text_in_another_language_is_another_context():
    def digest(comment: str) -> str:
        store = ContextStore(ContextOptions(tokens=400, max_chunks=16, max_bytes=1 << 16, chunk_lines=8, idle_ms=100))
        store.open("o", "lib/shared", "def parse_config(text):\n    return text\n", comment)
        return store.select("p", 0, "parse_config(text)\n", "", 0).digest

    assert digest("#") != digest("//")


def test_the_service_reads_the_language_it_is_given(tmp_path):
    from tabd.daemon.runtime.request import RequestBuilder
    from tabd.daemon.runtime.config import Config

    class _Model:
        model_id = "m"
        backend = None

    class _Workspace:
        def requested(self, doc, state):
            pass

    builder = RequestBuilder(Config(), _Model(), _Workspace(), lambda key: False)  # type: ignore[arg-type]
    text = "function main() {\n"
    state = DocState.from_text(text, len(text), 4800, 1200)
    assert not builder.settings_for(state, "d").multiline  # not told the language: Python's rule
    builder.opened("d", block_openers("javascript", "main.js"))
    assert builder.settings_for(state, "d").multiline
    builder.closed("d")
    assert not builder.settings_for(state, "d").multiline
