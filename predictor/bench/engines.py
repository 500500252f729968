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

`--shape NAME` runs a model shape instead of the embedded model: random weights
at Qwen2.5-Coder 0.5B's or 1.5B's configuration (shapes.py, built once without
the hub). Larger shapes run at 1024 context (prefill_per_1k). Beside the
timings tabd reports its resident memory against the weights file, the weight
format, and prompt-lookup decoding on a self-repeating file (speed-up with the
output checked equal). Without llama.cpp the tabd side still reports, and the
llama.cpp side fails with one line.
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


class PartialReport(RuntimeError):
    """A section that measured part of what it was asked for: the report, and the one line saying what failed."""

    def __init__(self, message: str, report: dict) -> None:
        super().__init__(message)
        self.report = report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tabd.predictor.bench.shapes import NAMES

    g = parser.add_argument_group("bench engines")
    g.add_argument("--shape", choices=NAMES, default="embedded",
                   help="model shape for bench engines: the embedded model, or random weights at a real configuration")
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


def repetitive_states() -> list[tuple[str, str]]:
    """A file that repeats its own lines (a table of similar methods), typed a little further each time."""
    body = "".join(f"    def get_{n}(self):\n        return self.data.get('{n}', None)\n\n"
                   for n in ("name", "path", "size", "mode", "user", "group"))
    text = "class Record:\n" + body + "    def get_owner(self):\n        return self.data.get("
    return [(text[:cut], "\n") for cut in range(len(text) - 48, len(text) + 1, 24)]


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class TabdEngine:
    def __init__(self, model_dir: str | None, threads: int, engine: str = "fast", weights: str = "auto") -> None:
        import torch

        from tabd.predictor.local import LocalBackend

        self.backend = LocalBackend(model_dir, device="cpu", threads=threads, engine=engine, weights=weights)
        torch.set_num_threads(threads)
        self.runner = self.backend.runner

    def fresh(self, ids: list[int]):
        from tabd.predictor.engine import generate

        cache = self.backend.runner.new_cache(len(ids) + 2 * DECODE + 8)
        return generate.prefill(self.runner, ids, cache, len(ids)), cache  # one chunk: nothing to pre-empt here

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

    def lookup(self) -> dict:
        """Prompt-lookup decoding on a self-repeating file: decode time with and without, the same text checked."""
        from tabd.predictor.types import GenSettings

        settings = GenSettings(max_new_tokens=DECODE, multiline=True)
        b = self.backend
        ms = {True: 0.0, False: 0.0}
        tokens = accepted = passes = 0
        same = True
        for i, (prefix, suffix) in enumerate(repetitive_states()):
            out = {}
            for on in (True, False):
                b.lookup = on
                p = b.predict(prefix, suffix, settings, slot_id=f"lookup-{on}")
                out[on] = (p.text, list(b.last_tokens))
                ms[on] += p.decode_ms
                if on:
                    tokens, accepted, passes = tokens + p.decode_tokens, accepted + p.accepted_drafts, passes + p.decode_passes
            same = same and out[True] == out[False]
        b.lookup = True
        return {"tokens": tokens, "accepted_drafts": accepted, "passes": passes,
                "tokens_per_pass": round(tokens / max(1, passes), 2), "decode_ms_lookup": round(ms[True], 1),
                "decode_ms_plain": round(ms[False], 1), "speedup": round(ms[False] / max(1e-9, ms[True]), 2),
                "same_output": same}


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


def run_round(eng, ids: list[int], context: int = CONTEXT) -> dict:
    out = {"prefill_512": eng.prefill_ms(ids[:512])} if context >= 2048 else {}
    n = context - DECODE
    ms = eng.prefill_ms(ids[:n])
    out.update({f"prefill_{context}": ms, "prefill_per_1k": ms * 1000 / n})
    decode = eng.decode_ms(ids[: context - 2 * DECODE])
    base = ids[: context - 2 * DECODE - 3]
    append = base + ids[len(base) : len(base) + 1]
    replace = base[:-2] + ids[len(base) + 5 : len(base) + 8]
    f1, n1 = eng.keystroke(base, append)
    f2, n2 = eng.keystroke(base, replace)
    out.update({"decode_per_token": decode, "keystroke_first": f1, "keystroke_16": n1, "replace_first": f2,
                "replace_16": n2})
    return out


def worker(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--model")
    p.add_argument("--gguf")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--context", type=int, default=CONTEXT)
    p.add_argument("--weights", default="auto")
    p.add_argument("--ids", required=True)
    a = p.parse_args(argv)
    ids = json.loads(Path(a.ids).read_text())
    if a.worker in ("tabd", "tabd-torch"):
        eng = TabdEngine(a.model, a.threads, "torch" if a.worker == "tabd-torch" else "fast", a.weights)
    else:
        eng = LlamaCppEngine(a.gguf, a.threads, flash=a.worker == "llamacpp-fa")
    run_round(eng, ids, 256)  # warm-up, short: at 0.5B a full round takes a minute
    label = eng.backend.engine_name if isinstance(eng, TabdEngine) else a.worker
    print("ready", label, flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "round":
            print(json.dumps(run_round(eng, ids, a.context)), flush=True)
        elif command == "extras" and isinstance(eng, TabdEngine):  # once, after the rounds
            print(json.dumps({"rss_bytes": rss_bytes(), "weights": eng.backend.weights_why,
                              "weight_bytes_held": eng.runner.weight_bytes(), "prefill_chunk": eng.backend.prefill_chunk,
                              "lookup": eng.lookup()}), flush=True)
        else:
            break
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


def _llamacpp(args, model_dir: Path) -> tuple[Path | None, str]:
    """(GGUF for llama.cpp, "") or (None, the one line saying why llama.cpp cannot run)."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return None, "llama.cpp is not installed (make bench-deps builds it once, 10-48 minutes)"
    try:
        return _gguf_path(args, model_dir), ""
    except (OSError, RuntimeError) as exc:  # no converter here, or it failed: one line, not a traceback
        return None, f"cannot make the model's GGUF for llama.cpp: {exc}"


def _start(name: str, cmd: list[str], threads: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    word, _, label = proc.stdout.readline().strip().partition(" ")
    if word != "ready":
        raise RuntimeError(f"the {name} worker did not start")
    return proc, label


def _ask(proc: subprocess.Popen, command: str) -> dict:
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def run_section(args: argparse.Namespace) -> dict:
    from tabd.predictor.bench import shapes

    shape = getattr(args, "shape", "embedded") or "embedded"
    model_dir = Path(getattr(args, "model", None) or shapes.model_dir(shape))
    context = CONTEXT if shape == "embedded" else 1024  # a 2k prefill at 0.5B takes half a minute here
    gguf, why = _llamacpp(args, model_dir)
    from tabd.predictor.fastload import tokenizer_for

    cfg = json.loads((model_dir / "config.json").read_text())
    ids = token_ids(tokenizer_for(model_dir, cfg.get("model_type", "llama")), context)
    threads = getattr(args, "engines_threads", 2)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tabd-engines-") as tmp:
        ids_file = Path(tmp) / "ids.json"
        ids_file.write_text(json.dumps(ids))
        workers, labels = {}, {}
        names = ["tabd"] + (["tabd-torch"] if getattr(args, "engines_torch", False) else [])
        names += ["llamacpp", "llamacpp-fa"] if gguf is not None else []
        for name in names:  # one at a time: a 1.5B shape is 6 GB of fp32 while it loads
            cmd = [sys.executable, "-m", "tabd.predictor.bench.engines", "--worker", name, "--ids", str(ids_file),
                   "--threads", str(threads), "--model", str(model_dir), "--context", str(context),
                   "--weights", getattr(args, "weights", "auto") or "auto", "--gguf", str(gguf or "")]
            workers[name], labels[name] = _start(name, cmd, threads)
        rounds: dict[str, list[dict]] = {name: [] for name in workers}
        for r in range(getattr(args, "engines_rounds", 5)):
            order = list(workers) if r % 2 == 0 else list(reversed(workers))
            for name in order:
                rounds[name].append(_ask(workers[name], "round"))
        extras = _ask(workers["tabd"], "extras")
        for proc in workers.values():
            proc.stdin.close()
            proc.wait(timeout=60)
    med = {name: {k: round(statistics.median(r[k] for r in rs), 2) for k in rs[0]} for name, rs in rounds.items()}
    file_bytes = shapes.weight_bytes(model_dir)
    report = {"shape": shape, "tabd": med["tabd"], "tabd_engine": labels["tabd"], "weights": extras["weights"],
              "rss_bytes": extras["rss_bytes"], "weights_file_bytes": file_bytes,
              "rss_over_weights_file": round(extras["rss_bytes"] / max(1, file_bytes), 2),
              "weight_bytes_held": extras["weight_bytes_held"], "prefill_chunk": extras["prefill_chunk"],
              "lookup": extras["lookup"], "threads": threads, "context": context}
    if gguf is None:
        report["llamacpp"] = f"unavailable: {why}"
        raise PartialReport(f"{why}; tabd's figures are absolute, the ratios could not be measured", report)
    best = {k: min(med["llamacpp"][k], med["llamacpp-fa"][k]) for k in med["tabd"]}
    report.update({"llamacpp": med["llamacpp"], "llamacpp_flash_attn": med["llamacpp-fa"],
                   "ratios": {k: round(med["tabd"][k] / best[k], 2) for k in med["tabd"]}, "gguf": gguf.name,
                   **_torch_columns(med, best)})
    return report


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
