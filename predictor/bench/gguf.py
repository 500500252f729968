"""Our model as a GGUF file for llama.cpp, with the converter that ships in llama-cpp-python's sdist.

`python -m tabd.predictor.bench.gguf [MODEL_DIR] [-o OUT.gguf]` (f32; --outtype f16, bf16 or q8_0).
llama.cpp's converter knows byte-level BPE pre-tokenizers by a hash of how they
split a test text; ours is new to it and it has no fallback, so an unknown hash
is written as "gpt-2", which splits the same way (identical ids on 278k tokens
of stdlib code, NOTES.md). It also writes what llama.cpp cannot guess from our
token names: no BOS (the local backend adds none) and the FIM token ids, so
llama-server's /infill works too. Keep "tabd" in the file name: servers show it
as the model name and RemoteBackend picks the FIM template from it.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from tabd.predictor.loading.loader import DEFAULT_MODEL_DIR

CACHE = Path(__file__).resolve().parents[2] / ".cache"

_RUNNER = r"""
import json, runpy, sys
src, model_dir, out, outtype = sys.argv[1:5]
sys.path[:0] = [src, src + "/gguf-py"]
import gguf
from conversion import base

original_pre = base.TextModel.get_vocab_base_pre
def vocab_base_pre(self, tokenizer):
    try:
        return original_pre(self, tokenizer)
    except NotImplementedError:
        return "gpt-2"  # same split rule as our byte-level BPE
base.TextModel.get_vocab_base_pre = vocab_base_pre

original_sp = base.TextModel._set_vocab_sentencepiece
def set_vocab_sentencepiece(self, *args, **kwargs):
    if not (self.dir_model / "tokenizer.model").is_file():  # no SentencePiece model: skip it without importing it
        raise FileNotFoundError(self.dir_model / "tokenizer.model")
    return original_sp(self, *args, **kwargs)
base.TextModel._set_vocab_sentencepiece = set_vocab_sentencepiece

added = {t["content"]: t["id"] for t in json.load(open(model_dir + "/tokenizer.json")).get("added_tokens", [])}
original_add = gguf.SpecialVocab.add_to_gguf
def add_to_gguf(self, gw, *args, **kwargs):
    original_add(self, gw, *args, **kwargs)
    def missing(key):
        return not any(key in kv for kv in gw.kv_data)
    if missing(gguf.Keys.Tokenizer.ADD_BOS):
        gw.add_add_bos_token(False)
    for key, tok in ((gguf.Keys.Tokenizer.FIM_PRE_ID, "<tabd_pre>"), (gguf.Keys.Tokenizer.FIM_SUF_ID, "<tabd_suf>"),
                     (gguf.Keys.Tokenizer.FIM_MID_ID, "<tabd_mid>"), (gguf.Keys.Tokenizer.FIM_PAD_ID, "<tabd_pad>")):
        if tok in added and missing(key):
            gw.add_uint32(key, added[tok])
gguf.SpecialVocab.add_to_gguf = add_to_gguf

sys.argv = [src + "/convert_hf_to_gguf.py", model_dir, "--outfile", out, "--outtype", outtype]
runpy.run_path(src + "/convert_hf_to_gguf.py", run_name="__main__")
"""


def converter_source() -> Path:
    """vendor/llama.cpp from llama-cpp-python's sdist: $TABD_LLAMACPP_SRC, or unpacked from a cached sdist."""
    env = os.environ.get("TABD_LLAMACPP_SRC")
    if env:
        return Path(env)
    for found in sorted(glob.glob(str(CACHE / "llamacpp-src" / "*" / "vendor" / "llama.cpp"))):
        if (Path(found) / "conversion").is_dir():
            return Path(found)
    sdists = sorted(CACHE.glob("llama_cpp_python-*.tar.gz"))
    if not sdists:
        raise FileNotFoundError(
            f"no llama-cpp-python sdist in {CACHE}; run: pip download --no-deps --no-binary :all: -d {CACHE} "
            "'llama-cpp-python==0.3.*'"
        )
    with tarfile.open(sdists[-1]) as tar:
        top = tar.getnames()[0].split("/")[0]
        wanted = [m for m in tar.getmembers() if m.name.startswith(f"{top}/vendor/llama.cpp/")
                  and ("/conversion/" in m.name or "/gguf-py/" in m.name or m.name.endswith("/convert_hf_to_gguf.py"))]
        tar.extractall(CACHE / "llamacpp-src", members=wanted, filter="data")
    return CACHE / "llamacpp-src" / top / "vendor" / "llama.cpp"


def convert(model_dir: str | os.PathLike = DEFAULT_MODEL_DIR, out: str | os.PathLike | None = None, outtype: str = "f32") -> Path:
    """Write the GGUF for model_dir and return its path (default .cache/tabd-<outtype>.gguf)."""
    model_dir = Path(model_dir).resolve()
    out = Path(out or CACHE / f"tabd-{outtype}.gguf").resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    json.loads((model_dir / "tokenizer.json").read_text())  # a fast tokenizer is what the converter reads
    src = converter_source()
    result = subprocess.run([sys.executable, "-c", _RUNNER, str(src), str(model_dir), str(out), outtype],
                            capture_output=True, text=True)
    if result.returncode != 0 or not out.exists():
        tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"GGUF conversion of {model_dir} failed: {' | '.join(tail)}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tabd.predictor.bench.gguf", description="Convert a tabd model to GGUF.")
    parser.add_argument("model_dir", nargs="?", default=str(DEFAULT_MODEL_DIR))
    parser.add_argument("-o", "--out", help="output file (default .cache/tabd-f32.gguf)")
    parser.add_argument("--outtype", default="f32", choices=["f32", "f16", "bf16", "q8_0"],
                        help="f32 (default), f16, bf16 or q8_0 (q8_0 needs make bench-deps' AMX-off build on this CPU)")
    args = parser.parse_args(argv)
    try:
        print(convert(args.model_dir, args.out, args.outtype))
    except (OSError, RuntimeError) as exc:
        print(f"gguf: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
