"""The embedded default model: the shipped tokenizer and weights, and a tiny `tabd train` run."""
from __future__ import annotations

import argparse
import json
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tabd.predictor import train  # noqa: E402

SHIPPED = Path(train.__file__).resolve().parent / "model"


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
    held = [p for p in paths if train.is_held_out(p, 2.0)]
    assert held == [p for p in paths if train.is_held_out(p, 2.0)]
    assert 10 < len(held) < 80


def test_middle_spans_stop_before_newline():
    import random

    text = "import os\n\ndef f(x):\n    y = x + 1\n    return y\n"
    rng = random.Random(0)
    for _ in range(200):
        start, end = train.pick_middle(text, rng)
        assert 0 <= start <= end <= len(text)


def test_tiny_training_run_produces_loadable_model(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    out = tmp_path / "model"
    args = parser.parse_args([
        "--out", str(out), "--minutes", "5", "--steps", "2", "--max-files", "6", "--vocab-size", "400",
        "--hidden", "32", "--layers", "1", "--heads", "4", "--kv-heads", "2", "--intermediate", "64", "--seq-len", "64", "--batch", "2",
        "--eval-lines", "2", "--val-rows", "2", "--no-progress",
    ])
    assert train.run(args) == 0
    results = json.loads((out / "eval.json").read_text())
    assert results["steps"] == 2 and results["val_loss"] > 0
    assert (out / "train_log.jsonl").read_text().strip()
    model = AutoModelForCausalLM.from_pretrained(str(out), use_safetensors=True)
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    assert len(AutoTokenizer.from_pretrained(str(out))) == model.config.vocab_size
