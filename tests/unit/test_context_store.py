"""The context store alone: bounds, bad input, what it picks and what it leaves out; and the layouts it feeds."""
from __future__ import annotations

import dataclasses

from tabd.daemon.context.chunk_store import ContextOptions, ContextStore, enclosing_headers, import_block, unusable
from tabd.daemon.runtime.config import Config, apply_client_options
from tabd.daemon.runtime.workspace import context_options
from tabd.predictor.prompt.prompt_text import fim_prompt, parse_fim_prompt, split_context
from tabd.predictor.prompt.templates import template_for
from tabd.predictor.types import ContextChunk

HELPER = "def parse_header(line):\n    name, _, value = line.partition(':')\n    return name.strip(), value.strip()\n"


def options(**changes: int) -> ContextOptions:
    """The daemon's default context options, with changes."""
    return dataclasses.replace(context_options(Config()), **changes)


def window_of(text: str, chars: int = 2400) -> tuple[int, str]:
    start = max(0, len(text) - chars)
    return start, text[start:]


def pick(store: ContextStore, doc: str, text: str):
    start, prefix = window_of(text)
    return store.select(doc, len(text), prefix, "", start)


def test_an_alike_open_file_is_picked_and_an_unrelated_one_is_not():
    store = ContextStore(options())
    store.open("h", "pkg/headers.py", HELPER)
    store.open("z", "pkg/zoo.py", "class Giraffe:\n    neck_length = 3\n")
    store.open("a", "pkg/app.py", "def handle(request):\n    key, value = parse_header(request.first")
    snap = pick(store, "a", store.text_of("a"))
    assert [c.path for c in snap.chunks] == ["pkg/headers.py"]
    assert snap.digest and snap.tokens > 0


def test_huge_file_is_chunked_within_the_bounds():
    bounds = options(max_chunks=10, max_bytes=8192)
    store = ContextStore(bounds)
    store.open("big", "big.py", "def f_%d(x):\n    return x\n" * 200_000)  # ~5 MB
    store.open("h", "h.py", HELPER)
    chunks = store.chunks()
    held_chunks, held_bytes = store.held()
    assert 0 < held_chunks <= 10 and held_bytes <= 8192
    assert len(chunks) == held_chunks
    assert any(c.doc == "h" for c in chunks)  # one huge file leaves room for the others


def test_binary_and_non_utf8_documents_are_skipped():
    store = ContextStore(options())
    store.open("bin", "blob.py", "\x00\x01\x02ELF" * 100 + "parse_header")
    store.open("bad", "bad.py", "parse_header = 1\n" + "\ud800" * 10)  # lone surrogates: not UTF-8
    store.open("rep", "rep.py", "parse_header\n" + "\ufffd" * 50)  # decoded with replacement characters
    store.open("a", "a.py", "x = parse_header(")
    assert set(store.skipped) == {"bin", "bad", "rep"}
    assert pick(store, "a", "x = parse_header(").chunks == ()
    assert unusable(HELPER) is None


def test_closing_drops_the_documents_chunks():
    store = ContextStore(options())
    store.open("h", "h.py", HELPER)
    store.open("a", "a.py", "x = parse_header(line")
    assert pick(store, "a", "x = parse_header(line").chunks
    generation = store.generation
    store.close("h")
    assert store.generation > generation  # the service picks again at the next pause
    assert pick(store, "a", "x = parse_header(line").chunks == ()
    assert all(c.doc != "h" for c in store.chunks())


def test_chunks_repeating_the_window_are_left_out():
    store = ContextStore(options())
    store.open("h", "h.py", HELPER)
    text = HELPER + "\nparse_header(x"  # the helper is inside the window already
    store.open("a", "a.py", text)
    assert all(c.doc != "h" for c in pick(store, "a", text).chunks)


def test_the_budget_bounds_the_context():
    store = ContextStore(options(tokens=60))
    for i in range(10):
        store.open(f"h{i}", f"h{i}.py", HELPER.replace("parse_header", f"parse_header{i}") + "# parse_header\n")
    store.open("a", "a.py", "x = parse_header(")
    snap = pick(store, "a", "x = parse_header(")
    assert 0 < snap.tokens <= 60
    assert ContextStore(options(tokens=0)).select("a", 0, "", "", 0).chunks == ()


def test_far_imports_and_enclosing_headers_of_the_current_file():
    body = "        total += 1\n" * 400
    text = "import os\nfrom collections import OrderedDict\n\n\nclass Counter:\n    def count(self, items):\n" + body + "        return Order"
    store = ContextStore(options())
    store.open("a", "a.py", text)
    snap = pick(store, "a", text)
    kinds = {c.kind: c.text for c in snap.chunks}
    assert kinds["imports"] == "import os\nfrom collections import OrderedDict\n"
    assert kinds["scope"] == "class Counter:\n    def count(self, items):\n"
    # within the window they would repeat it: nothing
    short = "import os\n\nclass C:\n    def f(self):\n        return o"
    assert enclosing_headers(short, len(short), 0) == ""
    assert import_block("x = 1\n") is None


def test_an_edit_in_the_same_region_does_not_change_the_generation():
    store = ContextStore(options())
    store.open("a", "a.py", "x = 1\n" * 1000)
    g = store.generation
    store.update("a", "x = 1\n" * 1000 + "y", 100)
    g1 = store.generation
    store.update("a", "x = 1\n" * 1000 + "yy", 101)  # the next keystroke
    assert store.generation == g1 > g
    store.update("a", "x = 1\n" * 1000 + "yy", 5000)  # somewhere else
    assert store.generation == g1 + 1


def test_bad_context_options_are_reported_and_the_defaults_kept():
    config, problems = apply_client_options(Config(), {"contextTokens": -5, "contextChunks": "many", "contextIdleMs": 10,
                                                       "contextLines": 16, "warmup": False})
    default = Config()
    assert (config.context_tokens, config.context_chunks, config.context_idle_ms) == (
        default.context_tokens, default.context_chunks, default.context_idle_ms)
    assert config.context_lines == 16 and config.warmup is False
    assert len(problems) == 3 and all("context" in p for p in problems)


def test_every_family_lays_context_out_first_and_serve_model_parses_it_back():
    chunks = [ContextChunk("pkg/a.py", "A = 1\n"), ContextChunk("pkg/b.py", "# a comment\ndef b():\n    pass")]
    expected_head = {
        "tabd": "# pkg/a.py\nA = 1\n# pkg/b.py\n# a comment\ndef b():\n    pass\n<tabd_eot>",
        "qwen2.5-coder": "<|repo_name|>workspace\n<|file_sep|>pkg/a.py\nA = 1\n<|file_sep|>pkg/b.py\n# a comment\ndef b():\n    pass\n",
        "starcoder2": "<file_sep>pkg/a.py\nA = 1\n<file_sep>pkg/b.py\n# a comment\ndef b():\n    pass\n<file_sep>",
    }
    for family, head in expected_head.items():
        template = template_for(family)
        prompt = fim_prompt(template, "x = ", "\n", chunks)
        assert prompt.startswith(head)
        got, rest = split_context(template, prompt)
        assert "".join(t for t, _ in template.context_pieces(got)) == head
        assert parse_fim_prompt(template, rest) == ("x = ", "\n")
    assert split_context(template_for("tabd"), fim_prompt(template_for("tabd"), "x", "")) == ([], "<tabd_suf><tabd_pre>x")


def test_typing_keeps_the_snapshot_and_a_jump_picks_again():
    from tabd.cache.state import DocState
    from tabd.daemon.runtime.workspace import Workspace

    changed = []
    ws = Workspace(options(), 2400, 600, lambda *a: changed.append(a))
    text = "x = parse_header(line)\n" * 400
    ws.opened("h", "h.py", HELPER)
    ws.opened("a", "a.py", text)

    def snap_at(offset: int, doc_text: str = text):
        state = DocState.from_text(doc_text, offset, 4800, 1200)
        return ws.snapshot("a", state, state.window(2400, 600))

    first = snap_at(5000)
    ws.opened("z", "z.py", "def parse_header_fast(line):\n    return line\n")  # a new file: only the idle timer may use it
    typed = text[:5000] + "parse_h" + text[5000:]
    assert snap_at(5007, typed) is first  # a keystroke at the cursor: the same context, the same KV head
    far = snap_at(1000)  # a jump: the text after the cursor and the window start both differ
    assert far is not first and far.anchor != first.anchor
    assert changed == []  # a request's own pick needs no warm-up: the request runs its prompt anyway


def test_whole_open_files_are_offered_for_copying_within_the_bytes_bound():
    store = ContextStore(options(max_bytes=4096))
    store.open("h", "pkg/headers.py", HELPER)
    store.open("big", "pkg/big.py", "x = 1\n" * 10_000)  # 60 kB: cut to what the bound leaves
    own = "# filler line\n" * 300 + "def handle(request):\n    key, value = parse_header(request.first"
    store.open("a", "pkg/app.py", own)
    start, prefix = window_of(own)
    snap = store.select("a", len(own), prefix, "", start)
    paths = [p for p, _ in snap.sources]
    # the current file above the window first (nearest), then the other files, newest first
    assert paths[0] == "pkg/app.py" and snap.sources[0][1] == own[max(0, start - 4096):start]
    # the newest other file takes what the bound leaves; the older one gets nothing
    assert paths == ["pkg/app.py", "pkg/big.py"] and sum(len(t) for _, t in snap.sources) == 4096
    # the sources are part of the digest (the cache key): a different file to copy from, a different key
    store.close("big")
    again = store.select("a", len(own), prefix, "", start)
    assert again.sources[1:] == (("pkg/headers.py", HELPER),)
    assert again.digest != snap.digest
    assert ContextStore(options(tokens=0)).select("a", 0, "", "", 0).sources == ()  # context off: none


def test_a_copy_comes_from_the_longest_match_in_the_window_or_another_file():
    from tabd.predictor.text.lookup import copy_suggestion

    other = "def run(config):\n    result = compute_everything(config, strict=True)\n"
    prefix = "    result = compute(1)\n    x = 2\n    result = compute"
    # the window has a 12-character match ("result = co..."); the other file a longer one
    assert copy_suggestion(prefix) == "(1)"
    assert copy_suggestion(prefix, sources=[other]) == "_everything(config, strict=True)"
    # at equal length the window wins: it is the nearer text
    assert copy_suggestion("    x = value_of(a)\n    x = value_of", sources=["    x = value_of(b)\n"]) == "(a)"
    assert copy_suggestion("    nothing alike here", sources=[other]) == ""


def test_context_and_copies_come_from_the_same_language_family():
    """#40: in a new TypeScript file `tot` got `al_sum` from `total_sum` in an open Python file. Other documents feed a
    document's context and copy sources only within its language family (JavaScript with TypeScript, C with C++);
    a document whose language nothing says goes with any."""
    py = "def summarize(items):\n    total_sum = 0\n    for item in items:\n        total_sum += item\n"
    store = ContextStore(options())
    store.open("p", "pkg/stats.py", py, "#", "python")
    store.open("j", "web/sum.js", "function totalOf(items) { let total_sum = 0; return total_sum; }\n", "//", "javascript")
    store.open("t", "web/new.ts", "let total_sum = 1;\nconst x = tot", "//", "typescript")
    snap = pick(store, "t", store.text_of("t"))
    assert [p for p, _ in snap.sources if p != "web/new.ts"] == ["web/sum.js"]
    assert {c.path for c in snap.chunks} <= {"web/sum.js", "web/new.ts"}
    # the Python file still feeds Python, and nothing of the TypeScript ones
    store.open("q", "pkg/more.py", "def mean(items):\n    return total_sum / len(items)\n", "#", "python")
    paths = [p for p, _ in pick(store, "q", store.text_of("q")).sources]
    assert "pkg/stats.py" in paths and not any(p.startswith("web/") for p in paths)
    # the languageId decides over the extension; an unknown language goes with any
    store.open("u", "notes", "total_sum = total_sum", "#", "")
    assert "pkg/stats.py" in [p for p, _ in pick(store, "u", store.text_of("u")).sources]
    store.open("h", "src/vec.h", "int total_sum(int *v);\n", "//", "")
    store.open("c", "src/vec.cpp", "int total_sum(int *v) {\n  return tot", "//", "cpp")
    assert [p for p, _ in pick(store, "c", store.text_of("c")).sources if p != "src/vec.cpp"] == ["src/vec.h", "notes"]
