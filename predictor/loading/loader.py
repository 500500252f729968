"""Loading a local Hugging Face causal-LM directory: safetensors only, no remote code, clear errors."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tabd.predictor.types import ModelLoadError

DEFAULT_MODEL_DIR = Path(__file__).resolve().parents[1] / "model"


@dataclass(frozen=True)
class Placement:
    device: str  # "cpu" or "cuda"
    dtype: str  # "float32" or "bfloat16"


def model_dir_for(path: str | os.PathLike | None) -> str | None:
    """The model directory `--model` names: a GGUF file's directory, imported once and cached (gguf_import.py);
    a directory, or None (the embedded model), as it is."""
    if path is None or Path(path).is_dir():
        return None if path is None else str(path)
    from tabd.predictor.loading import gguf_import

    return gguf_import.model_dir_for(path)


def check_model_dir(path: str | os.PathLike, trust_remote_code: bool = False) -> Path:
    """The directory, if it holds a usable model; else a ModelLoadError naming the problem."""
    d = Path(path)
    if d.is_file():
        raise ModelLoadError(f"{d} is a file, neither a model directory nor a GGUF file", "model_dir")
    if not d.is_dir():
        raise ModelLoadError(f"model directory {d} does not exist")
    config_path = d / "config.json"
    if not config_path.is_file():
        raise ModelLoadError(f"{d} has no config.json: not a Hugging Face model directory")
    if not any(d.glob("*.safetensors")):
        found = sorted(p.name for p in d.glob("*.bin")) or ["nothing"]
        raise ModelLoadError(f"{d} has no *.safetensors weights (found {', '.join(found)}); tabd loads safetensors only")
    try:
        config = json.loads(config_path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{config_path} is not valid JSON: {exc}") from None
    if config.get("auto_map") and not trust_remote_code:
        raise ModelLoadError(f"{d} asks for remote code (auto_map in config.json); it loads only where remote code "
                             "is trusted", "trust_remote_code")
    if not (d / "tokenizer.json").is_file() and not (d / "tokenizer_config.json").is_file():
        raise ModelLoadError(f"{d} has no tokenizer (tokenizer.json)")
    return d


def choose_placement(device: str = "auto") -> Placement:
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device cuda was asked for, but torch sees no CUDA device", "device")
    if device not in ("cpu", "cuda"):
        raise ModelLoadError(f"unknown device {device!r}: use auto, cpu or cuda", "device")
    # bf16 on the GPU; fp32 on the CPU, where bf16 prefill is faster but decode is not and
    # greedy output can drift on a small model.
    return Placement(device, "bfloat16" if device == "cuda" else "float32")


def load(path: str | os.PathLike, device: str = "auto", trust_remote_code: bool = False, fast: bool = False):
    """(model, tokenizer, placement) for a local model directory.

    With `fast`, a Llama-shaped directory is read without transformers (predictor/loading/fastload.py: seconds less at
    start-up); anything else, and every directory when not `fast`, loads through transformers.
    """
    d = check_model_dir(path, trust_remote_code)
    placement = choose_placement(device)
    if fast and not trust_remote_code:
        from tabd.predictor.loading import fastload

        try:
            loaded = fastload.load(d, placement.device, placement.dtype)
        except Exception as exc:  # corrupt safetensors, a config that is not JSON, ...
            raise ModelLoadError(f"cannot load the model in {d}: {type(exc).__name__}: {exc}") from None
        if loaded is not None:
            return (*loaded, placement)
    return _load_transformers(d, placement, trust_remote_code)


def _load_transformers(d: Path, placement: Placement, trust_remote_code: bool):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # stderr is the editor's log: no progress bars in it
    try:
        tokenizer = AutoTokenizer.from_pretrained(d, trust_remote_code=trust_remote_code, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            d,
            use_safetensors=True,
            trust_remote_code=trust_remote_code,
            local_files_only=True,
            dtype=getattr(torch, placement.dtype),
        )
    except Exception as exc:  # corrupt safetensors, a config transformers cannot read, ...
        raise ModelLoadError(f"cannot load the model in {d}: {type(exc).__name__}: {exc}") from None
    model.to(placement.device)
    model.eval()
    return model, tokenizer, placement
