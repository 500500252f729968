"""The fast loader (predictor/loading/fastload.py) against transformers' own loading: same tokens, same suggestions."""
from __future__ import annotations

import json
import shutil

import pytest
import torch

from tabd.predictor.loading import fastload, loader
from tabd.predictor.backends.local import LocalBackend
from tabd.predictor.backends.backend_settings import LocalSettings
from tabd.predictor.types import GenSettings, ModelLoadError

from support.predictor_cases import CODE, same_tokens_over_edits
from support.qwen2 import qwen2_dir

TEXTS = [CODE, "x = 'é ü 中文 🙂'\n\tdef  f():\r\n  pass", "<tabd_pre>a<tabd_suf>b<tabd_mid>", "", "   ", "\n\n\n"]


def test_the_embedded_model_loads_without_transformers_modeling():
    model, tokenizer, _ = loader.load(loader.DEFAULT_MODEL_DIR, "cpu", fast=True)
    assert isinstance(model, fastload.FastModel) and isinstance(tokenizer, fastload.FastTokenizer)
    backend = LocalBackend(LocalSettings(engine="torch+native", threads=1))
    assert backend.engine_name in ("torch+native", "torch") and isinstance(backend.tokenizer, fastload.FastTokenizer)


def test_the_tokenizer_encodes_and_decodes_as_transformers_does():
    from transformers import AutoTokenizer

    ref = AutoTokenizer.from_pretrained(loader.DEFAULT_MODEL_DIR, local_files_only=True)
    fast = fastload.FastTokenizer.from_dir(loader.DEFAULT_MODEL_DIR)
    for text in TEXTS:
        ids = ref.encode(text, add_special_tokens=False)
        assert fast.encode(text, add_special_tokens=False) == ids
        assert fast.decode(ids) == ref.decode(ids)
    assert len(fast) == len(ref)
    assert fast.eos_token_id == ref.eos_token_id and fast.unk_token_id == ref.unk_token_id
    assert set(fast.all_special_tokens) == set(ref.all_special_tokens)
    assert fast.get_added_vocab() == ref.get_added_vocab()
    for token in ("<tabd_pre>", "<tabd_mid>", "no such token"):
        assert fast.convert_tokens_to_ids(token) == ref.convert_tokens_to_ids(token)


def test_fast_loaded_engine_suggests_what_the_transformers_loaded_engine_does():
    fast = LocalBackend(LocalSettings(engine="torch+native", threads=1))
    ref = LocalBackend(LocalSettings(engine="transformers", threads=1))  # transformers' loader and forward: the reference
    assert not isinstance(ref.runner.model, fastload.FastModel)
    settings = GenSettings(max_new_tokens=16)
    assert all(a.text == b.text for a, b in same_tokens_over_edits(fast, ref, settings, 8))




def test_a_qwen2_checkpoint_with_bias_and_an_untied_head_loads_fast_and_agrees(tmp_path):
    d = qwen2_dir(tmp_path)
    fast = LocalBackend(LocalSettings(str(d), engine="torch", threads=1))
    ref = LocalBackend(LocalSettings(str(d), engine="transformers", threads=1))
    assert isinstance(loader.load(d, "cpu", fast=True)[0], fastload.FastModel) and fast.engine_name == "torch"
    ids = fast.tokenizer.encode(CODE, add_special_tokens=False)[:300]
    assert ids == ref.tokenizer.encode(CODE, add_special_tokens=False)[:300]
    with torch.no_grad():  # a random model's argmax hides small errors (a wrong rope base): compare the logits
        want = ref.runner.model(input_ids=torch.tensor([ids])).logits[0, -1]
    got = fast.runner.forward_last(ids, fast.runner.new_cache(len(ids)))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    settings = GenSettings(max_new_tokens=12)
    same_tokens_over_edits(fast, ref, settings, 4)


def test_what_the_fast_loader_does_not_know_goes_to_transformers(tmp_path):
    d = qwen2_dir(tmp_path)
    config = json.loads((d / "config.json").read_text())
    config["rope_scaling"] = config["rope_parameters"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": 50000.0}
    (d / "config.json").write_text(json.dumps(config))
    model, _, _ = loader.load(d, "cpu", fast=True)
    assert not isinstance(model, fastload.FastModel)


def test_corrupt_weights_are_a_clear_error(tmp_path):
    d = tmp_path / "m"
    shutil.copytree(loader.DEFAULT_MODEL_DIR, d)
    (d / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ModelLoadError, match="cannot load the model"):
        loader.load(d, "cpu", fast=True)
