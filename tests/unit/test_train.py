"""The embedded default model: the shipped tokenizer and weights, and a tiny `tabd train` run."""
from __future__ import annotations

import argparse
import json
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tabd.predictor.training import corpus, data, train  # noqa: E402
from tabd.predictor.training import rows as rows_mod  # noqa: E402

SHIPPED = Path(train.__file__).resolve().parent.parent / "model"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(SHIPPED))


def test_special_tokens_are_single_ids(tokenizer):
    ids = [tokenizer.convert_tokens_to_ids(t) for t in train.SPECIAL_TOKENS]
    assert len(set(ids)) == 5
    for token, token_id in zip(train.SPECIAL_TOKENS, ids):
        assert tokenizer(token, add_special_tokens=False)["input_ids"] == [token_id]
    assert tokenizer.eos_token == "<tabd_eot>"
    assert tokenizer.pad_token == "<tabd_pad>"
    spm = "<tabd_suf>\n    return x\n<tabd_pre>def f(x):\n    "
    encoded = tokenizer(spm, add_special_tokens=False)["input_ids"]
    assert encoded[0] == tokenizer.convert_tokens_to_ids("<tabd_suf>")
    assert tokenizer.convert_tokens_to_ids("<tabd_pre>") in encoded


def test_tokenizer_round_trips_stdlib_code(tokenizer):
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    samples = [stdlib / name for name in ("argparse.py", "textwrap.py", "json/decoder.py")]
    samples = [p for p in samples if p.exists()]
    assert samples
    tricky = "def f(\tx):  # caf\u00e9 \u2192 \U0001f600\r\n    return '''\n\n  '''\n"
    for text in [p.read_text(encoding="utf-8") for p in samples] + [tricky]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text


def test_shipped_model_loads_with_gqa():
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(SHIPPED), use_safetensors=True)
    config = model.config
    assert config.num_key_value_heads < config.num_attention_heads
    assert config.tie_word_embeddings
    assert config.eos_token_id == 0 and config.pad_token_id == 4
    assert (SHIPPED / "model.safetensors").stat().st_size <= 30 * 1024 * 1024


def test_held_out_split_is_deterministic():
    paths = [f"pkg/mod{i}.py" for i in range(2000)]
    held = [p for p in paths if data.is_held_out(p, 2.0)]
    assert held == [p for p in paths if data.is_held_out(p, 2.0)]
    assert 10 < len(held) < 80


def test_middle_spans_stop_before_newline():
    import random

    text = "import os\n\ndef f(x):\n    y = x + 1\n    return y\n"
    rng = random.Random(0)
    for _ in range(200):
        start, end = rows_mod.pick_middle(text, rng)
        assert 0 <= start <= end <= len(text)


def test_tiny_training_run_produces_loadable_model(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    out = tmp_path / "model"
    args = parser.parse_args([
        "--out", str(out), "--minutes", "5", "--steps", "2", "--max-files", "6", "--vocab-size", "400",
        "--hidden", "32", "--layers", "1", "--heads", "4", "--kv-heads", "2", "--intermediate", "64", "--seq-len", "64", "--batch", "2",
        "--eval-lines", "2", "--val-rows", "2", "--no-progress", "--threads", "1",
    ])
    assert train.run(args) == 0
    results = json.loads((out / "eval.json").read_text())
    assert results["steps"] == 2 and results["val_loss"] > 0
    assert (out / "train_log.jsonl").read_text().strip()
    model = AutoModelForCausalLM.from_pretrained(str(out), use_safetensors=True)
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    assert len(AutoTokenizer.from_pretrained(str(out))) == model.config.vocab_size


TINY = ["--hidden", "32", "--layers", "1", "--heads", "4", "--kv-heads", "2", "--intermediate", "64",
        "--seq-len", "64", "--batch", "2", "--eval-lines", "1", "--val-rows", "2", "--no-progress", "--threads", "1",
        "--max-files", "6", "--tokenizer", str(SHIPPED), "--seed", "5"]


def _run(args: list[str]) -> int:
    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    return train.run(parser.parse_args(args))


def _losses(out: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines() if line.strip()]
    return {r["step"]: r["loss"] for r in rows if "step" in r and "event" not in r}


def test_resumed_run_follows_the_unbroken_loss_curve(tmp_path):
    """Steps 1-6 in one go, and 1-3 then --resume to 6, see the same batches and so the same losses."""
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert _run(["--out", str(whole), "--steps", "6", "--log-every", "1", *TINY]) == 0
    assert _run(["--out", str(broken), "--steps", "3", "--log-every", "1", *TINY]) == 0
    assert (broken / train.CHECKPOINT).exists()
    assert _run(["--out", str(broken), "--resume", str(broken), "--steps", "6", "--log-every", "1", "--no-progress",
                 "--threads", "1", "--eval-lines", "1", "--val-rows", "2"]) == 0
    a, b = _losses(whole), _losses(broken)
    assert sorted(a) == sorted(b) == [1, 2, 3, 4, 5, 6]
    for step in a:
        assert abs(a[step] - b[step]) < 1e-3, (step, a[step], b[step])
    assert json.loads((broken / "eval.json").read_text())["steps"] == 6
    ckpt_a = train.load_checkpoint(whole / train.CHECKPOINT)
    ckpt_b = train.load_checkpoint(broken / train.CHECKPOINT)
    for name, tensor in ckpt_a["model"].items():
        assert (tensor - ckpt_b["model"][name]).abs().max().item() < 1e-4, name


def test_resume_without_a_checkpoint_is_a_clear_error(tmp_path, capsys):
    assert _run(["--out", str(tmp_path / "x"), "--resume", str(tmp_path / "nothing"), "--steps", "1"]) == 2
    assert "no checkpoint.pt" in capsys.readouterr().err


def _wheel(path: Path, files: dict[str, str]) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def test_corpus_keeps_held_out_distributions_and_vendored_copies_out(tmp_path):
    code = "def add(a, b):\n    return a + b\n\n\nclass Point:\n    x: int = 0\n    y: int = 0\n    z: int = 0\n"
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels / "goodpkg-1.0-py3-none-any.whl", {
        "goodpkg/__init__.py": code,
        "goodpkg/copy.py": code + "\n\n",  # the same file but for blank lines: deduplicated
        "goodpkg/_vendor/requests/api.py": "def get(url):\n    return url  # a vendored copy\n" * 4,
        "six.py": "PY3 = True\n" * 10,  # a top-level module of an installed distribution
        "goodpkg/gen_pb2.py": "# Generated by the protocol buffer compiler.  DO NOT EDIT!\n" * 3,
        "goodpkg/tests/test_add.py": "from goodpkg import add\n\ndef test_add():\n    assert add(1, 2) == 3\n" * 40,
        "goodpkg-1.0.dist-info/METADATA": "Name: goodpkg",
    })
    _wheel(wheels / "requests-2.0-py3-none-any.whl", {"requests/__init__.py": code + "# requests\n"})
    out = tmp_path / "corpus.jsonl.gz"
    stats = corpus.build([("goodpkg", "1.0"), ("requests", "2.0")], tmp_path, out, test_share=0.15,
                         excluded={"requests", "six"})
    files = corpus.read_corpus(out)
    paths = {f.path for f in files}
    assert paths == {"goodpkg/__init__.py"}  # the test file alone is over a 15% share
    assert {f.dist for f in files} == {"goodpkg"}
    assert stats.skipped["duplicate"] == 1 and stats.skipped["vendored"] == 1
    assert stats.skipped["excluded-top-level"] == 1 and stats.skipped["generated"] == 1


def test_corpus_list_rejects_unpinned_lines(tmp_path):
    bad = tmp_path / "list.txt"
    bad.write_text("# ok\ngoodpkg==1.0\nloose>=2\n")
    with pytest.raises(ValueError, match="list.txt:3"):
        corpus.read_distributions(bad)


def test_shipped_distribution_list_holds_nothing_installed_here():
    listed = {name for name, _ in corpus.read_distributions()}
    assert len(listed) >= 200
    assert not listed & corpus.installed_names()


def test_context_rows_put_same_repository_chunks_before_the_fim_sample():
    tok = train.load_tokenizer(SHIPPED)
    cfg = train.TrainConfig(p_spm=1.0, p_psm=0.0, p_context=1.0, seq_len=512, context_tokens=200)
    sources = [data.Source("pkg", "pkg/a.py", "def alpha_helper(x):\n    return x * 2\n" * 5, False),
               data.Source("pkg", "pkg/b.py", "from pkg.a import alpha_helper\n\nvalue = alpha_helper(3)\n" * 5, False)]
    rows = rows_mod.Rows(sources, tok, cfg, seed=1)
    row = rows.fim_sample(1, 513)
    text = tok.decode(row)
    eot, suf = text.index("<tabd_eot>"), text.index("<tabd_suf>")
    assert text.startswith("# pkg/a.py\n") and eot < suf  # context, its separator, then the daemon's layout
    from tabd.predictor.prompt.templates import template_for
    from tabd.predictor.types import ContextChunk

    pieces = template_for("tabd", "spm").context_pieces([ContextChunk("pkg/a.py", "x = 1")])
    assert pieces == [("# pkg/a.py\nx = 1\n", False), ("<tabd_eot>", True)]


def test_context_rows_can_pick_the_chunk_that_holds_what_the_middle_needs():
    tok = train.load_tokenizer(SHIPPED)
    cfg = train.TrainConfig(context_tokens=40)  # room for one chunk
    local = "import os\nvalue = os.path.join(base_dir, name)\n"
    sources = [data.Source("pkg", "pkg/a.py", "def zeta_special_helper(x):\n    return x\n", False),
               data.Source("pkg", "pkg/b.py", local * 2, False),
               data.Source("pkg", "pkg/c.py", local, False)]
    rows = rows_mod.Rows(sources, tok, cfg, seed=1)
    alike = rows.context_for(2, local, "")
    needed = rows.context_for(2, local, "", needed="zeta_special_helper(value)")
    assert [c.path for c in alike] == ["pkg/b.py"]  # the daemon's rule: most alike the local window
    assert [c.path for c in needed] == ["pkg/a.py"]  # the middle's missing name wins


def test_the_fim_markers_are_never_targets_so_the_model_never_learns_to_write_one():
    """The daemon writes every marker itself; a model taught to predict them began suggestions with
    `<tabd_pre>` where the cursor sat in an indentation. EOT stays a target: it is how a middle ends."""
    tok = train.load_tokenizer(SHIPPED)
    cfg = train.TrainConfig(p_spm=0.5, p_psm=0.5, seq_len=256)
    sources = [data.Source("pkg", "pkg/a.py", "def alpha_helper(x):\n    return x * 2\n" * 40, False)]
    rows = rows_mod.Rows(sources, tok, cfg, seed=3)
    x, y = rows.batch(16)
    ids = {t: tok.convert_tokens_to_ids(t) for t in ("<tabd_pre>", "<tabd_suf>", "<tabd_mid>", "<tabd_eot>")}
    inputs, targets = set(x.flatten().tolist()), set(y.flatten().tolist())
    assert {ids["<tabd_pre>"], ids["<tabd_suf>"]} <= inputs  # the markers are in the rows the model reads
    assert not {ids["<tabd_pre>"], ids["<tabd_suf>"], ids["<tabd_mid>"]} & targets
    assert ids["<tabd_eot>"] in targets and rows_mod.IGNORE in targets


def test_some_middles_start_inside_the_indentation():
    import random

    text = "class A:\n    def f(self, x):\n        return x + 1\n" * 5
    rng = random.Random(0)
    spans = [rows_mod.pick_middle(text, rng) for _ in range(400)]
    inside = [(a, b) for a, b in spans if a > text.rfind("\n", 0, a) + 1 and text[a - 1] == text[a] == " "
              and b == text.find("\n", a)]  # from inside the indentation to the line's end
    assert len(inside) > 5  # a dedented or half-indented cursor, then the rest of the indentation and the line


def test_a_paused_run_spends_no_training_budget():
    """A run stopped with kill -STOP while a benchmark runs keeps its budget: the long step counts as a few."""
    now = [0.0]
    clock = train.TrainClock(elapsed=10.0, now=lambda: now[0])
    for _ in range(20):
        now[0] += 1.0
        clock.tick()
    assert clock.elapsed == 30.0
    now[0] += 600.0  # stopped for ten minutes
    assert clock.tick() <= 30.0 + train.TrainClock.PAUSE_FACTOR
    now[0] += 1.0
    assert clock.tick() <= 31.0 + train.TrainClock.PAUSE_FACTOR


def test_a_middle_ends_after_the_closers_the_daemon_leaves_out_of_the_suffix():
    """Rows are laid out as the daemon lays its prompts out (predictor/prompt/pairs.py): a suffix never starts with a closer
    on the middle's line, the middle writes it."""
    from tabd.predictor.prompt import pairs
    from tabd.predictor.training.rows import closers_after

    text = "x = f(a, g(b))\nif ok:\n    y = \"s\"\n"
    cut = text.index("b") + 1
    assert closers_after(text, cut) == 2 and pairs.normalised_after(text[cut + 2:]) == text[cut + 2:]
    assert closers_after(text, text.index("s") + 1) == 1
    assert closers_after(text, text.index("a")) == 0
