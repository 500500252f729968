"""The npm corpus (`tabd train corpus-npm`): the held-out scan, what is read from a tarball, and its rows.

Tarballs are built here; nothing touches the network (a cached tarball is never fetched again).
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from tabd.predictor.training import corpus, data, npm_corpus, npm_installed

CODE = ("export function clamp(value, low, high) {\n  if (value < low) return low;\n"
        "  if (value > high) return high;\n  return value;\n}\n\nexport const unit = clamp(0.5, 0, 1);\n")
TS = ("export interface Range {\n  low: number;\n  high: number;\n}\n\n"
      "export function width(range: Range): number {\n  return range.high - range.low;\n}\n")


def _tarball(path: Path, files: dict[str, str | bytes]) -> Path:
    """An npm tarball: every file under `package/`, as `npm pack` writes it."""
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            raw = text if isinstance(text, bytes) else text.encode("utf-8")
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(raw)
            tf.addfile(info, io.BytesIO(raw))
    return path


def test_the_held_out_scan_finds_a_package_planted_in_any_root(tmp_path):
    nested = tmp_path / "global" / "npm" / "node_modules" / "@scope" / "Planted"
    nested.mkdir(parents=True)
    (nested / "package.json").write_text(json.dumps({"name": "@Scope/Planted", "version": "1.0.0"}))
    (tmp_path / "global" / "broken").mkdir()
    (tmp_path / "global" / "broken" / "package.json").write_text("{ not json")  # ignored, not a crash
    lock = tmp_path / "ext"
    lock.mkdir()
    (lock / "package-lock.json").write_text(json.dumps({
        "name": "ext", "lockfileVersion": 3,
        "packages": {"": {"name": "ext"}, "node_modules/locked-dep": {"version": "2.0.0"},
                     "node_modules/a/node_modules/deeper-dep": {"version": "1.0.0"}}}))
    names = npm_installed.installed_npm_names([tmp_path / "global", lock, tmp_path / "missing"], extra=("code-server",))
    assert names == {"@scope/planted", "ext", "locked-dep", "deeper-dep", "code-server"}


def test_the_sweep_finds_node_modules_anywhere_below_a_root(tmp_path):
    (tmp_path / "a" / "b" / "node_modules" / "x").mkdir(parents=True)
    (tmp_path / "c" / "node_modules").mkdir(parents=True)
    found = set(npm_installed.node_modules_dirs(tmp_path))
    assert found == {tmp_path / "a" / "b" / "node_modules", tmp_path / "c" / "node_modules"}


def test_the_default_roots_hold_node_s_globals_and_the_project_s_cache():
    roots = {str(r) for r in npm_installed.default_roots(sweep=False)}
    assert {"/usr/lib/node_modules", "/usr/share/javascript"} <= roots
    assert str(npm_installed.PROJECT / ".cache") in roots and str(npm_installed.PROJECT / "editors") in roots


def test_the_builder_skips_a_held_out_package_and_every_copy_or_build(tmp_path, capsys):
    cache = tmp_path / "cache"
    (cache / "npm").mkdir(parents=True)
    _tarball(cache / "npm" / "goodpkg-1.0.0.tgz", {
        "package.json": '{"name": "goodpkg"}',
        "src/clamp.js": CODE,
        "src/copy.js": CODE + "\n\n",  # the same file but for blank lines: deduplicated
        "src/range.ts": TS,
        "node_modules/dep/index.js": CODE.replace("clamp", "bundled"),
        "vendor/lib.js": CODE.replace("clamp", "vendored"),
        "dist/goodpkg.js": CODE.replace("clamp", "bundle"),
        "src/clamp.min.js": CODE.replace("clamp", "minified"),
        "src/long.js": "const table = [" + "1, " * 600 + "];\n",  # a line far too long to be typed
        "src/latin1.js": "// caf\xe9\n".encode("latin-1") + CODE.replace("clamp", "latin").encode(),
        "src/built.js": '"use strict";\nObject.defineProperty(exports, "__esModule", { value: true });\n' + CODE,
        "src/clamp.cjs": '"use strict";\nexports.clamp = clamp;\n' + CODE.replace("export ", ""),  # a dual build's twin
        "src/fp.js": "// This file is generated automatically by `scripts/fp.ts`.\n" + CODE.replace("clamp", "fp"),
        "src/util/ms.js": CODE.replace("clamp", "copied") + "\n",
        "README.md": "# goodpkg\n",
    })
    _tarball(cache / "npm" / "scope-held-2.0.0.tgz", {"index.js": CODE.replace("clamp", "held")})
    out = tmp_path / "npm.jsonl.gz"
    installed = tmp_path / "global" / "npm" / "lib"
    installed.mkdir(parents=True)
    (installed / "ms.js").write_text(CODE.replace("clamp", "copied"))  # installed here; copied into goodpkg below
    stats, held_out = npm_corpus.build([("goodpkg", "1.0.0"), ("@scope/held", "2.0.0")], cache, out,
                                       excluded={"@scope/held"},
                                       held_keys=npm_installed.installed_source_keys([tmp_path / "global"]))
    assert held_out == ["@scope/held"]
    assert "@scope/held is installed as node code on this machine" in capsys.readouterr().err
    files = corpus.read_corpus(out)
    assert {f.path: f.lang for f in files} == {"goodpkg/src/clamp.js": "javascript", "goodpkg/src/range.ts": "typescript"}
    assert stats.distributions == 1 and stats.skipped["duplicate"] == 1
    assert stats.skipped["node_modules"] == 1 and stats.skipped["vendored-or-bundle"] == 2
    assert stats.skipped["minified"] == 2 and stats.skipped["not-utf8"] == 1 and stats.skipped["compiled"] == 1
    assert stats.skipped["dual-build"] == 1 and stats.skipped["generated"] == 1
    assert stats.skipped["installed-copy"] == 1


def test_the_package_list_reads_scoped_names_and_rejects_unpinned_lines(tmp_path):
    good = tmp_path / "list.txt"
    good.write_text("# a comment\n@Scope/Name@1.2.3  # why\nplain@0.1.0\n")
    assert npm_corpus.read_packages(good) == [("@scope/name", "1.2.3"), ("plain", "0.1.0")]
    bad = tmp_path / "bad.txt"
    bad.write_text("plain@0.1.0\n@scope/loose\n")
    with pytest.raises(ValueError, match="bad.txt:2"):
        npm_corpus.read_packages(bad)
    assert npm_corpus.tarball_name("@scope/name", "1.2.3") == "scope-name-1.2.3.tgz"


def test_the_shipped_package_list_is_pinned_and_holds_nothing_installed_here():
    listed = npm_corpus.read_packages()
    assert len(listed) >= 60
    held = npm_installed.installed_npm_names(npm_installed.default_roots(sweep=False))
    assert not {name for name, _ in listed} & held


def test_the_corpus_round_trips_through_training_sources_with_its_language(tmp_path):
    out = tmp_path / "npm.jsonl.gz"
    corpus.write_corpus([corpus.SourceFile("goodpkg", "goodpkg/a.js", CODE, False, "javascript"),
                         corpus.SourceFile("goodpkg", "goodpkg/b.ts", TS, True, "typescript")], out)
    sources = data.corpus_sources(str(out))
    assert [(s.group, s.path, s.test, s.comment) for s in sources] == [
        ("goodpkg", "goodpkg/a.js", False, "//"), ("goodpkg", "goodpkg/b.ts", True, "//")]
    assert sources[0].text == CODE
    python = tmp_path / "py.jsonl.gz"
    corpus.write_corpus([corpus.SourceFile("pkg", "pkg/a.py", "x = 1\n", False)], python)
    with gzip.open(python, "rt") as fh:
        assert "lang" not in json.loads(fh.readline())  # the PyPI corpus's rows as before
    assert data.corpus_sources(str(python))[0].comment == "#"


def test_row_comments_are_the_daemon_s_for_each_language():
    from tabd.daemon.context.languages import comment_of

    for lang, comment in data.COMMENTS.items():
        assert comment_of(lang) == comment


def test_the_cli_builds_from_a_cached_tarball(tmp_path, capsys, monkeypatch):
    from tabd.predictor.training import commands

    cache = tmp_path / "cache"
    (cache / "npm").mkdir(parents=True)
    _tarball(cache / "npm" / "goodpkg-1.0.0.tgz", {"lib/clamp.js": CODE})
    listing = tmp_path / "list.txt"
    listing.write_text("goodpkg@1.0.0\n")
    parser = argparse.ArgumentParser()
    commands.add_arguments(parser)
    args = parser.parse_args(["corpus-npm", "--list", str(listing), "--cache", str(cache)])
    monkeypatch.setattr(npm_corpus, "installed_npm_names", lambda: {"other"})  # the whole-disk scan is tested above
    monkeypatch.setattr(npm_corpus, "installed_source_keys", lambda: set())
    assert commands.run(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["packages"] == 1 and summary["files"] == 1 and summary["held_out"] == []
    assert (cache / "npm.jsonl.gz").exists() and (cache / "npm.manifest.json").exists()


def test_rows_head_a_javascript_file_s_context_chunks_with_slashes():
    pytest.importorskip("transformers")
    from tabd.predictor.training import rows as rows_mod
    from tabd.predictor.training import train

    tok = train.load_tokenizer(Path(train.__file__).resolve().parent.parent / "model")
    cfg = train.TrainConfig(p_spm=1.0, p_psm=0.0, p_context=1.0, seq_len=512, context_tokens=200)
    sources = [data.Source("pkg", "pkg/a.js", "export function alphaHelper(x) {\n  return x * 2;\n}\n" * 4, False, "//"),
               data.Source("pkg", "pkg/b.js", "import { alphaHelper } from './a.js';\nconst v = alphaHelper(3);\n" * 4,
                           False, "//"),
               data.Source("py", "py/a.py", "def alpha_helper(x):\n    return x * 2\n" * 5, False),
               data.Source("py", "py/b.py", "from py.a import alpha_helper\n\nvalue = alpha_helper(3)\n" * 5, False)]
    rows = rows_mod.Rows(sources, tok, cfg, seed=1)
    js, py = tok.decode(rows.fim_sample(1, 513)), tok.decode(rows.fim_sample(3, 513))
    assert js.startswith("// pkg/a.js\nexport function alphaHelper") and js.index("<tabd_eot>") < js.index("<tabd_suf>")
    assert py.startswith("# py/a.py\n")  # Python rows as before


def test_a_run_trains_on_every_corpus_given_and_one_corpus_works_as_before(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tabd.predictor.training import train

    py, js = tmp_path / "py.jsonl.gz", tmp_path / "npm.jsonl.gz"
    corpus.write_corpus([corpus.SourceFile("pkg", "pkg/a.py", "def f(x):\n    return x + 1\n" * 20, False)], py)
    corpus.write_corpus([corpus.SourceFile("goodpkg", "goodpkg/a.js", CODE * 5, False, "javascript"),
                         corpus.SourceFile("goodpkg", "goodpkg/b.ts", TS * 5, False, "typescript")], js)
    tiny = ["--hidden", "32", "--layers", "1", "--heads", "4", "--kv-heads", "2", "--intermediate", "64",
            "--seq-len", "64", "--batch", "2", "--eval-lines", "1", "--val-rows", "2", "--no-progress", "--threads", "1",
            "--max-files", "4", "--steps", "1", "--tokenizer", str(Path(train.__file__).resolve().parent.parent / "model")]

    def run(*args: str) -> int:
        parser = argparse.ArgumentParser()
        train.add_arguments(parser)
        return train.run(parser.parse_args([*args, *tiny]))

    assert run("--out", str(tmp_path / "both"), "--corpus", str(py), "--corpus", str(js)) == 0
    assert json.loads((tmp_path / "both" / "eval.json").read_text())["train_files"] == 4 + 1 + 2
    saved = json.loads((tmp_path / "both" / "train_config.json").read_text())
    assert saved["corpus"] == str(py) and saved["extra_corpora"] == [str(js)]
    assert run("--out", str(tmp_path / "one"), "--corpus", str(py)) == 0
    assert json.loads((tmp_path / "one" / "eval.json").read_text())["train_files"] == 4 + 1
    assert run("--out", str(tmp_path / "bad"), "--corpus", str(py), "--corpus", str(tmp_path / "none.gz")) == 2
    assert "none.gz: no such file" in capsys.readouterr().err
