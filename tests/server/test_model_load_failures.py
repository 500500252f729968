"""A model directory that cannot be loaded (broken safetensors, pickle only, remote code) gives a real `tabd serve`
empty answers and one error message naming the cause; the server stays up and exits cleanly.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from support.rawserver import RawServer


MODEL_DIR = Path(__file__).resolve().parents[2] / "predictor" / "model"


def broken_model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "broken-model"
    d.mkdir()
    for f in MODEL_DIR.iterdir():
        if f.suffix != ".safetensors":
            shutil.copy(f, d / f.name)
    (d / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}" + b"\0" * 100)
    return d


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["broken-safetensors", "pickle-only", "remote-code"])
def test_a_model_that_cannot_load_gives_empty_results_and_a_message(tmp_path, kind):
    d = broken_model_dir(tmp_path)
    if kind == "pickle-only":
        (d / "model.safetensors").unlink()
        (d / "pytorch_model.bin").write_bytes(b"not loaded: tabd loads safetensors only")
    elif kind == "remote-code":
        (d / "model.safetensors").write_bytes((MODEL_DIR / "model.safetensors").read_bytes())
        config = json.loads((d / "config.json").read_text())
        config["auto_map"] = {"AutoModelForCausalLM": "evil.Model"}
        (d / "config.json").write_text(json.dumps(config))
        (d / "evil.py").write_text("raise SystemExit('remote code ran')\n")
    s = RawServer("--model", str(d), "--max-new-tokens", "4", stderr=tmp_path / "stderr.txt")
    try:
        s.initialize()
        s.open("file:///m.py", "import os\nos.")
        t0 = time.monotonic()
        assert s.inline("file:///m.py", 1, 3, timeout=120)["result"] == {"items": [], "tabd": {"reason": "error"}}
        assert time.monotonic() - t0 < 120
        message = s.wait_for(lambda m: m.get("method") == "window/showMessage", timeout=30)["params"]
        assert message["type"] == 1 and "could not be loaded" in message["message"]
        expected = {"broken-safetensors": "header", "pickle-only": "safetensors only", "remote-code": "--trust-remote-code"}[kind]
        assert expected in message["message"]
        s.alive()
        assert s.shutdown_exit() == 0
    finally:
        s.close()
