"""Next-edit training rows (`tabd train edits`, edit_rows.py): the rows are the daemon's own edit prompt and the
window after the next edit, token for token; only hunks inside the window are the answer; mid-typing rows; rows
that cannot fit; release pairs from local wheels with the held-out rule kept; a tiny training run with edit rows."""
from __future__ import annotations

import argparse
import json
import random
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tabd.predictor.prompt import edit_prompt as ep  # noqa: E402
from tabd.predictor.training import commands, corpus, data, edit_rows, edits_corpus, train  # noqa: E402
from tabd.predictor.training import rows as rows_mod  # noqa: E402

SHIPPED = Path(train.__file__).resolve().parent.parent / "model"
LINES = [f"    value_{i} = compute(count, {i})\n" for i in range(60)]
OLD = "def run(count):\n" + "".join(LINES)


def renamed(lines: list[int]) -> str:
    """OLD with `count` renamed to `limit` on these lines of the body (one-line hunks, line count kept)."""
    body = [ln.replace("count", "limit") if i in lines else ln for i, ln in enumerate(LINES)]
    return "def run(count):\n" + "".join(body)


@pytest.fixture(scope="module")
def tok():
    return train.load_tokenizer(SHIPPED)


def examples(old: str, new: str, n: int, p_mid: float = 0.0, seed: int = 0) -> list[edit_rows.EditExample]:
    rng = random.Random(seed)
    out = [edit_rows.example("pkg/mod.py", old, new, rng, p_mid=p_mid) for _ in range(n)]
    return [e for e in out if e is not None]


def test_a_row_is_the_daemons_edit_prompt_then_the_updated_window(tok):
    new = renamed([2, 4, 5, 9, 20, 21, 40])
    exs = examples(OLD, new, 60)
    assert len(exs) == 60
    suf, pre, eot = (tok.convert_tokens_to_ids(t) for t in ("<tabd_suf>", "<tabd_pre>", "<tabd_eot>"))
    new_lines = new.splitlines(keepends=True)
    for ex in exs:
        ids = edit_rows.tokens(ex, tok, 2049)
        prompt = ep.edit_prompt("mod.py", ex.edits, ex.win)  # what the daemon builds, from the basename
        assert ids[:2] == [suf, pre] and ids[-1] == eot
        assert ids[2:2 + len(tok.encode(prompt, add_special_tokens=False))] == tok.encode(prompt, add_special_tokens=False)
        assert tok.decode(ids) == "<tabd_suf><tabd_pre>" + prompt + ex.answer + "<tabd_eot>"
        assert ex.answer.endswith("\n") and ep.read_answer(ex.win, ex.answer) == ex.answer
        assert len(tok.encode(ex.answer, add_special_tokens=False)) + 1 <= ep.answer_budget(ex.win)
        # one-line renames: every remaining rename in the window is made, so the window reads as in the new release
        assert ex.answer == "".join(new_lines[ex.win.first_line:ex.win.end_line])
        assert 1 <= len(ex.edits) <= ep.MAX_EDITS
        for e in ex.edits:  # each recent edit as whole lines, numbered in the current text
            assert e.old.replace("count", "limit") == e.new
    no_edit = sum(ex.answer == ep.window_text(ex.win) for ex in exs) / len(exs)
    print(f"no-edit share on scattered renames: {no_edit:.2f}")
    assert 0.1 < no_edit < 0.9  # both answers are common: "no edit here" and "the next rename"


def test_a_rows_prompt_ids_are_the_ids_the_daemons_local_backend_lays_out():
    """The daemon passes the edit prompt as a FIM prefix with an empty suffix (LocalBackend.layout); the row must
    hold exactly those ids before its answer."""
    from tabd.predictor.backends.backend_settings import LocalSettings
    from tabd.predictor.backends.local import LocalBackend

    backend = LocalBackend(LocalSettings(engine="transformers", threads=1))
    for ex in examples(OLD, renamed([2, 4, 5, 9, 20, 21, 40]), 20, p_mid=0.5, seed=2):
        layout = backend.layout(ex.prompt(), "", ep.answer_budget(ex.win))
        assert layout.heal == ""  # the prompt ends its line: no token is backed off
        ids = edit_rows.tokens(ex, backend.tokenizer, 2049)
        answer = backend.tokenizer.encode(ex.answer, add_special_tokens=False)
        assert ids == layout.ids + answer + [backend.tokenizer.convert_tokens_to_ids("<tabd_eot>")]


def test_only_hunks_wholly_inside_the_window_are_the_answer():
    new_lines = OLD.splitlines(keepends=True)
    new_lines[1] = "    value_0 = compute(limit, 0)\n"  # hunk 0: the user's last edit, the cursor on line 1
    new_lines[3] = "    value_2 = compute(limit, 2)\n"  # inside the window (lines 0..7)
    new_lines[6:10] = ["    merged = compute_all(limit)\n"]  # lines 6..9: straddles the window's end
    new_lines[40] = "    value_39 = compute(limit, 39)\n"  # far below
    new = "".join(new_lines)
    assert len(ep.line_hunks(OLD, new)) == 4
    exs = [e for e in examples(OLD, new, 40) if len(e.edits) == 1]  # k = 1: only the first hunk made
    assert exs
    for ex in exs:
        assert ex.win.first_line == 0 and ex.win.end_line == 8
        current = OLD.splitlines(keepends=True)
        current[1] = new_lines[1]
        expected = current[:8]
        expected[3] = new_lines[3]
        assert ex.answer == "".join(expected)  # line 3 renamed; lines 6-7 kept, though the straddling hunk moves them


def test_no_remaining_hunk_in_the_window_means_the_window_unchanged():
    new = renamed([0, 30, 50])
    exs = [e for e in examples(OLD, new, 30) if len(e.edits) == 1]
    assert exs
    for ex in exs:
        assert ex.answer == ep.window_text(ex.win)


def test_mid_typing_rows_cut_the_next_hunk_at_a_pause_and_complete_it():
    new = renamed([2, 5, 8, 11])
    exs = examples(OLD, new, 40, p_mid=1.0)
    mids = [e for e in exs if e.mid_typing]
    assert mids
    for ex in mids:
        partial = ex.edits[-1]
        typed = partial.new.rstrip("\n")
        full = new.splitlines(keepends=True)[partial.line]
        assert full.startswith(typed) and len(typed) < len(full.rstrip("\n"))
        assert partial.old == OLD.splitlines(keepends=True)[partial.line]  # the whole old line, as edits show
        cut = len(typed)
        assert typed[-1] in "(,=" or (typed[-1].isalnum() and not full[cut].isalnum() and full[cut] != "_")
        assert typed + "\n" in ex.win.text and full in ex.answer  # the window shows it half typed, the answer whole
    assert edit_rows.pause_points("    x = f(a, b)\n") == [5, 7, 9, 10, 11, 12, 14]  # after a word or a mark


def test_a_row_that_cannot_fit_is_empty_and_old_edits_go_first(tok):
    ex = next(e for e in examples(OLD, renamed(list(range(0, 40, 2))), 20) if len(e.edits) == ep.MAX_EDITS)
    full = edit_rows.tokens(ex, tok, 4096)
    assert edit_rows.tokens(ex, tok, 20) == []
    fewer = edit_rows.tokens(ex, tok, len(full) - 1)
    assert fewer and len(fewer) < len(full)
    assert tok.decode(fewer) == "<tabd_suf><tabd_pre>" + ex.prompt(1) + ex.answer + "<tabd_eot>"
    assert ex.prompt(1).count("@@ ") == ep.MAX_EDITS - 1
    grown = edit_rows.EditExample(ex.path, ex.edits, ex.win, ex.answer + "    extra_line = 1\n" * 40, False)
    assert edit_rows.tokens(grown, tok, 4096) == []  # longer than the daemon lets the model write


def test_a_window_with_a_form_feed_makes_no_row():
    old = OLD.replace("value_3 ", "value_3\x0c ")
    new = old.replace("count, 2)", "limit, 2)").replace("count, 4)", "limit, 4)")
    assert examples(old, new, 20) == []


def _pairs_file(path: Path, rows: list[dict]) -> Path:
    edits_corpus.write_rows(rows, path)
    return path


def test_training_rows_draw_edit_samples_on_the_resumable_sampler(tok, tmp_path):
    pairs = [{"dist": "pkg", "path": "pkg/mod.py", "from": "1", "to": "2", "old": OLD, "new": renamed([2, 4, 9, 20])}]
    cfg = train.TrainConfig(p_edit=1.0, seq_len=512)
    sources = [data.Source("pkg", "pkg/a.py", "def alpha_helper(x):\n    return x * 2\n" * 40, False)]
    rows = rows_mod.Rows(sources, tok, cfg, seed=3, edits=pairs)
    texts = [tok.decode(rows.row()) for _ in range(4)]
    assert all(t.startswith("<tabd_suf><tabd_pre><<< edits: mod.py\n") and "<<< updated\n" in t for t in texts)
    whole = rows_mod.Rows(sources, tok, train.TrainConfig(p_edit=0.5, seq_len=512), seed=4, edits=pairs)
    first = rows_mod.Rows(sources, tok, train.TrainConfig(p_edit=0.5, seq_len=512), seed=4, edits=pairs)
    a = [whole.row() for _ in range(8)]
    b = [first.row() for _ in range(4)]
    resumed = rows_mod.Rows(sources, tok, train.TrainConfig(p_edit=0.5, seq_len=512), seed=99, edits=pairs)
    resumed.rng.setstate(first.rng.getstate())  # what a checkpoint keeps
    assert a == b + [resumed.row() for _ in range(4)]
    assert {len(r) for r in a} == {513}
    kinds = ["<<< updated" in tok.decode(r) for r in a]
    assert any(kinds) and not all(kinds)  # edit rows and others, the rest of each row plain text
    x, y = whole.batch(4)
    ids = {tok.convert_tokens_to_ids(t) for t in ("<tabd_pre>", "<tabd_suf>")}
    assert not ids & set(y.flatten().tolist())  # the same masking as FIM rows


def _wheel(path: Path, files: dict[str, str | bytes]) -> None:
    """A wheel pip accepts: the files, and the dist-info pip reads (METADATA, WHEEL)."""
    name, version = path.name.split("-")[:2]
    info = f"{name}-{version}.dist-info/"
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
        zf.writestr(info + "METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(info + "WHEEL", "Wheel-Version: 1.0\nGenerator: tabd-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(info + "RECORD", "")


def test_train_edits_pairs_two_local_releases_and_never_reads_a_held_out_one(tmp_path, capsys):
    index = tmp_path / "index"
    index.mkdir()
    big_old = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(100))
    big_new = "".join(f"def g{i}(y):\n    return y * {i}\n\n" for i in range(100))  # every function rewritten
    latin = "# caf\xe9\n".encode("latin-1") + b"x = 1\n" * 20
    _wheel(index / "editpkg-1.0-py3-none-any.whl", {
        "editpkg/core.py": OLD, "editpkg/same.py": OLD + "# same\n", "editpkg/gone.py": OLD,
        "editpkg/big.py": big_old, "editpkg/latin.py": latin,
        "editpkg/blob.py": b"DATA = 1\n\x00\x01\x02\n" * 20})
    _wheel(index / "editpkg-2.0-py3-none-any.whl", {
        "editpkg/core.py": renamed([1, 7, 30]), "editpkg/same.py": OLD + "# same\n", "editpkg/new.py": OLD,
        "editpkg/big.py": big_new, "editpkg/latin.py": latin + b"y = 2\n",
        "editpkg/blob.py": b"DATA = 2\n\x00\x01\x02\n" * 20})
    _wheel(index / "firstpkg-1.0-py3-none-any.whl", {"firstpkg/__init__.py": OLD})  # no earlier release
    _wheel(index / "pytest-98.0-py3-none-any.whl", {"pytest/__init__.py": OLD})  # installed here: held out
    _wheel(index / "pytest-99.0-py3-none-any.whl", {"pytest/__init__.py": renamed([1, 2])})
    listing = tmp_path / "list.txt"
    listing.write_text("editpkg==2.0\nfirstpkg==1.0\npytest==99.0\n")
    cache, out = tmp_path / "cache", tmp_path / "edits.jsonl.gz"
    parser = argparse.ArgumentParser()
    commands.add_arguments(parser)
    args = parser.parse_args(["edits", "--list", str(listing), "--cache", str(cache), "-o", str(out),
                              "--find-links", str(index)])
    assert commands.run(args) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = edits_corpus.read_pairs(out)
    assert [(r["dist"], r["path"], r["from"], r["to"]) for r in rows] == [("editpkg", "editpkg/core.py", "1.0", "2.0")]
    assert rows[0]["old"] == OLD and rows[0]["new"] == renamed([1, 7, 30])
    assert summary["pairs"] == 1 and summary["distributions"] == 1 and summary["no_previous"] == 1
    assert summary["skipped"]["not-utf8"] == 1 and summary["skipped"]["binary"] == 1
    assert summary["skipped"]["rewrite"] == 1
    assert summary["skipped"]["unchanged"] == 1 and summary["skipped"]["held-out"] == 1
    assert not [p for p in cache.rglob("*.whl") if p.name.startswith("pytest")]  # never even downloaded
    assert 0 < summary["no_edit_share"] < 1
    before = out.read_bytes()
    assert commands.run(args) == 0 and out.read_bytes() == before  # from the cache, the same bytes
    capsys.readouterr()


TINY = ["--hidden", "32", "--layers", "1", "--heads", "4", "--kv-heads", "2", "--intermediate", "64",
        "--seq-len", "512", "--batch", "2", "--eval-lines", "1", "--val-rows", "2", "--no-progress", "--threads", "1",
        "--max-files", "6", "--tokenizer", str(SHIPPED)]


def _train(args: list[str]) -> int:
    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    return train.run(parser.parse_args(args))


def _tiny_data(tmp_path: Path) -> list[str]:
    src = tmp_path / "corpus.jsonl.gz"
    code = "def alpha_helper(x):\n    return x * 2\n\n\nclass Point:\n    x: int = 0\n" * 20
    corpus.write_corpus([corpus.SourceFile("pkg", f"pkg/m{i}.py", code + f"# {i}\n", False) for i in range(3)], src)
    edits = _pairs_file(tmp_path / "edits.jsonl.gz", [
        {"dist": "pkg", "path": "pkg/mod.py", "from": "1", "to": "2", "old": OLD, "new": renamed([2, 4, 9, 20])}])
    return ["--corpus", str(src), "--no-stdlib", "--edits", str(edits), "--p-edit", "0.5"]


def test_a_tiny_run_trains_on_edit_rows_and_the_corpus_alone(tmp_path):
    out, data_args = tmp_path / "model", _tiny_data(tmp_path)
    edits = Path(data_args[data_args.index("--edits") + 1])
    assert _train(["--out", str(out), *data_args, "--minutes", "0.05", *TINY]) == 0
    results = json.loads((out / "eval.json").read_text())
    assert results["train_files"] == 3 and results["val_files"] >= 1  # the stdlib only validates
    assert results["steps"] >= 1
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["edits"] == str(edits) and saved["p_edit"] == 0.5 and saved["train_stdlib"] is False


def test_a_resumed_run_with_edit_rows_sees_the_same_rows(tmp_path):
    data_args = _tiny_data(tmp_path)
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert _train(["--out", str(whole), *data_args, "--steps", "4", "--log-every", "1", *TINY]) == 0
    assert _train(["--out", str(broken), *data_args, "--steps", "2", "--log-every", "1", *TINY]) == 0
    assert _train(["--out", str(broken), "--resume", str(broken), "--steps", "4", "--log-every", "1", "--no-progress",
                   "--threads", "1", "--eval-lines", "1", "--val-rows", "2"]) == 0

    def losses(out: Path) -> dict[int, float]:
        rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines() if line.strip()]
        return {r["step"]: r["loss"] for r in rows if "step" in r and "event" not in r}

    a, b = losses(whole), losses(broken)
    assert sorted(a) == sorted(b) == [1, 2, 3, 4]
    for step in a:
        assert abs(a[step] - b[step]) < 1e-3, (step, a[step], b[step])


def test_edit_flags_are_checked(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    assert train.run(parser.parse_args(["--out", str(tmp_path / "m"), "--no-stdlib"])) == 2
    assert "--no-stdlib needs --corpus" in capsys.readouterr().err
    assert train.run(parser.parse_args(["--out", str(tmp_path / "m"), "--p-edit", "0.3"])) == 2
    assert "needs --edits" in capsys.readouterr().err
    assert train.run(parser.parse_args(["--out", str(tmp_path / "m"), "--edits", str(tmp_path / "none.gz"),
                                        "--p-edit", "0.3"])) == 2
    assert "tabd train edits" in capsys.readouterr().err


def test_no_stdlib_from_scratch_trains_its_tokenizer_on_the_corpus(tmp_path):
    data_args = _tiny_data(tmp_path)[:3]  # the corpus and --no-stdlib, no edits
    tiny = [a for a in TINY if a not in ("--tokenizer", str(SHIPPED))]
    out = tmp_path / "model"
    assert _train(["--out", str(out), *data_args, "--steps", "1", "--vocab-size", "500", *tiny]) == 0
    tok = train.load_tokenizer(out)
    words = {t.lstrip("\u0120") for t in tok.get_vocab()}
    assert len(tok) < 500 and {"Point", "helper"} <= words  # the tiny corpus's words, and all its merges: no stdlib
