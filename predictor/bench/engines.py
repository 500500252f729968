"""`tabd bench engines`: tabd's engine against llama.cpp on the same model and token ids.

Each engine runs in its own process (`python -m tabd.predictor.bench.engines
--worker ENGINE`), the parent asks them for rounds in turn, so both see the
same machine noise, and medians are reported with ratios tabd / llama.cpp
(below 1.0: tabd is faster); `tabd_engine` says which engine tabd ran
("fast": native one-token steps; "torch" where they could not be built).
Measured at 2048 context with 2 threads:
prefill at 512 and 2048, decode per token, and the "keystroke later" request
(the previous request's prompt is cached; the new prompt appends 1 token, or
replaces 2 and appends 1): time to the first token and to 16 tokens.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CONTEXT = 2048
DECODE = 16
SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("bench engines")
    g.add_argument("--engines-rounds", type=int, default=5, help="alternating rounds (default 5)")
    g.add_argument("--engines-gguf", metavar="FILE", help="GGUF of the model for llama.cpp (default: convert and cache)")
    g.add_argument("--engines-threads", type=int, default=2, help="threads for both engines (default 2)")
    g.add_argument("--engines-torch", action="store_true",
                   help="also run tabd's engine with its one-token steps in torch (no native code), as tabd_torch")


def token_ids(tokenizer, n: int) -> list[int]:
    text = "".join(p.read_text() for p in sorted(SAMPLES.glob("*.py")))
    ids = tokenizer.encode(text, add_special_tokens=False)
    while len(ids) < n:
        ids = ids + ids
    return ids[:n]


# -- workers: one engine each, one round per command ------------------------------


class TabdEngine:
    def __init__(self, model_dir: str | None, threads: int, engine: str = "fast") -> None:
        import torch

        from tabd.predictor.local import LocalBackend

        self.backend = LocalBackend(model_dir, device="cpu", threads=threads, engine=engine)
        torch.set_num_threads(threads)
        self.runner = self.backend.runner

    def fresh(self, ids: list[int]):
        from tabd.predictor.engine import generate

        cache = self.backend._new_cache(CONTEXT + 8)
        return generate.prefill(self.runner, ids, cache), cache

    def prefill_ms(self, ids: list[int]) -> float:
        t0 = time.perf_counter()
        self.fresh(ids)
        return (time.perf_counter() - t0) * 1000

    def decode_ms(self, ids: list[int]) -> float:
        from tabd.predictor.engine import generate

        logits, cache = self.fresh(ids)
        token = generate.greedy(logits)
        times = []
        for _ in range(DECODE):
            t0 = time.perf_counter()
            token = generate.greedy(generate.decode_one_token(self.runner, token, cache))
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)

    def keystroke(self, old: list[int], new: list[int]) -> tuple[float, float]:
        """(first token ms, 16 tokens ms) for `new` when the cache holds `old` and what was decoded after it."""
        from tabd.predictor.engine import generate
        from tabd.predictor.local import common_prefix

        logits, cache = self.fresh(old)
        generate.decode_n_tokens(self.runner, logits, cache, DECODE, lambda t: True, lambda t: None)
        t0 = time.perf_counter()
        keep = min(common_prefix(old, new), len(new) - 1)
        cache.truncate(keep)
        logits = generate.prefill(self.runner, new[keep:], cache)
        first = generate.greedy(logits)
        t1 = time.perf_counter()
        generate.decode_n_tokens(self.runner, logits, cache, DECODE, lambda t: True, lambda t: None)
        t2 = time.perf_counter()
        del first
        return (t1 - t0) * 1000, (t2 - t0) * 1000


class LlamaCppEngine:
    def __init__(self, gguf: str, threads: int, flash: bool) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=gguf, n_ctx=CONTEXT + 16, n_threads=threads, n_threads_batch=threads,
                         n_batch=CONTEXT, flash_attn=flash, verbose=False, logits_all=False)

    def prefill_ms(self, ids: list[int]) -> float:
        self.llm.reset()
        t0 = time.perf_counter()
        self.llm.eval(ids)
        return (time.perf_counter() - t0) * 1000

    def decode_ms(self, ids: list[int]) -> float:
        self.llm.reset()
        self.llm.eval(ids)
        times = []
        for i in range(DECODE):
            t0 = time.perf_counter()
            self.llm.eval([ids[i]])
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)

    def _generate(self, ids: list[int], n: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        first = 0.0
        for i, _ in enumerate(self.llm.generate(ids, temp=0.0, top_k=1, reset=True)):
            if i == 0:
                first = (time.perf_counter() - t0) * 1000
            if i + 1 >= n:
                break
        return first, (time.perf_counter() - t0) * 1000

    def keystroke(self, old: list[int], new: list[int]) -> tuple[float, float]:
        self.llm.reset()
        self._generate(old, DECODE)  # the previous request: its prompt and output are cached
        return self._generate(new, DECODE)


def run_round(eng, ids: list[int]) -> dict:
    p512 = eng.prefill_ms(ids[:512])
    p2048 = eng.prefill_ms(ids[: CONTEXT - DECODE])
    decode = eng.decode_ms(ids[: CONTEXT - 2 * DECODE])
    base = ids[: CONTEXT - 2 * DECODE - 3]
    append = base + ids[len(base) : len(base) + 1]
    replace = base[:-2] + ids[len(base) + 5 : len(base) + 8]
    f1, n1 = eng.keystroke(base, append)
    f2, n2 = eng.keystroke(base, replace)
    return {"prefill_512": p512, "prefill_2048": p2048, "decode_per_token": decode,
            "keystroke_first": f1, "keystroke_16": n1, "replace_first": f2, "replace_16": n2}


def worker(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--model")
    p.add_argument("--gguf")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ids", required=True)
    a = p.parse_args(argv)
    ids = json.loads(Path(a.ids).read_text())
    if a.worker in ("tabd", "tabd-torch"):
        eng = TabdEngine(a.model, a.threads, "torch" if a.worker == "tabd-torch" else "fast")
    else:
        eng = LlamaCppEngine(a.gguf, a.threads, flash=a.worker == "llamacpp-fa")
    run_round(eng, ids)  # warm-up
    label = eng.backend.engine_name if isinstance(eng, TabdEngine) else a.worker
    print("ready", label, flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        print(json.dumps(run_round(eng, ids)), flush=True)
    return 0


# -- the parent ---------------------------------------------------------------------


def _gguf_path(args, model_dir: Path) -> Path:
    given = getattr(args, "engines_gguf", None)
    if given:
        if not Path(given).is_file():
            raise FileNotFoundError(f"{given}: no such GGUF file")
        return Path(given)
    import hashlib

    from tabd.predictor.bench import gguf

    weights = sorted(model_dir.glob("*.safetensors"))
    stamp = hashlib.blake2b(
        "".join(f"{w.resolve()}:{w.stat().st_size}:{w.stat().st_mtime_ns}" for w in weights).encode(), digest_size=6
    ).hexdigest()
    cached = gguf.CACHE / f"tabd-f32-{stamp}.gguf"  # converted once per set of weights
    if cached.exists():
        return cached
    return Path(gguf.convert(model_dir, cached, "f32"))


def run_section(args: argparse.Namespace) -> dict:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        raise RuntimeError("llama.cpp is not installed (pip install 'llama-cpp-python[server]' builds it, about 10 minutes)") from None
    from transformers import AutoTokenizer

    from tabd.predictor.loader import DEFAULT_MODEL_DIR

    model_dir = Path(getattr(args, "model", None) or DEFAULT_MODEL_DIR)
    try:
        gguf = _gguf_path(args, model_dir)
    except (OSError, RuntimeError) as exc:  # no converter here, or it failed: one line, not a traceback
        raise RuntimeError(f"cannot make the model's GGUF for llama.cpp: {exc}") from None
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    ids = token_ids(tokenizer, CONTEXT)
    threads = getattr(args, "engines_threads", 2)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tabd-engines-") as tmp:
        ids_file = Path(tmp) / "ids.json"
        ids_file.write_text(json.dumps(ids))
        workers, labels = {}, {}
        names = ("tabd", "llamacpp", "llamacpp-fa") + (("tabd-torch",) if getattr(args, "engines_torch", False) else ())
        for name in names:
            cmd = [sys.executable, "-m", "tabd.predictor.bench.engines", "--worker", name, "--ids", str(ids_file),
                   "--threads", str(threads), "--model", str(model_dir), "--gguf", str(gguf)]
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                    env={**os.environ, "OMP_NUM_THREADS": str(threads)})
            word, _, label = proc.stdout.readline().strip().partition(" ")
            if word != "ready":
                raise RuntimeError(f"the {name} worker did not start")
            workers[name], labels[name] = proc, label
        rounds: dict[str, list[dict]] = {name: [] for name in workers}
        for r in range(getattr(args, "engines_rounds", 5)):
            order = list(workers) if r % 2 == 0 else list(reversed(workers))
            for name in order:
                proc = workers[name]
                proc.stdin.write("round\n")
                proc.stdin.flush()
                rounds[name].append(json.loads(proc.stdout.readline()))
        for proc in workers.values():
            proc.stdin.close()
            proc.wait(timeout=30)
    med = {name: {k: round(statistics.median(r[k] for r in rs), 2) for k in rs[0]} for name, rs in rounds.items()}
    best = {k: min(med["llamacpp"][k], med["llamacpp-fa"][k]) for k in med["tabd"]}
    ratios = {k: round(med["tabd"][k] / best[k], 2) for k in med["tabd"]}
    return {"tabd": med["tabd"], "llamacpp": med["llamacpp"], "llamacpp_flash_attn": med["llamacpp-fa"],
            "ratios": ratios, "threads": threads, "context": CONTEXT, "gguf": gguf.name, "tabd_engine": labels["tabd"],
            **_torch_columns(med, best)}


def _torch_columns(med: dict, best: dict) -> dict:
    """With --engines-torch: the torch-only engine's medians, its ratios to llama.cpp, and what native code buys."""
    if "tabd-torch" not in med:
        return {}
    torch_only = med["tabd-torch"]
    return {"tabd_torch": torch_only,
            "ratios_torch": {k: round(torch_only[k] / best[k], 2) for k in torch_only},
            "native_speedup": {k: round(torch_only[k] / med["tabd"][k], 2) for k in torch_only}}


if __name__ == "__main__":
    sys.exit(worker(sys.argv[1:]))
