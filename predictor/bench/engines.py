"""`tabd bench engines`: tabd's engine against llama.cpp on the same model and token ids.

Each engine runs in its own process (`python -m tabd.predictor.bench.engines
--worker ENGINE`), the parent asks them for rounds in turn, so both see the
same machine noise, and medians are reported with ratios tabd / llama.cpp
(below 1.0: tabd is faster); `tabd_engine` says which engine tabd ran
("torch+native": native one-token steps; "torch" where they could not be built).
Measured at 2048 context with 2 threads:
prefill at 512 and 2048, decode per token, and the "keystroke later" request
(the previous request's prompt is cached; the new prompt appends 1 token, or
replaces 2 and appends 1): time to the first token and to 16 tokens. A round
prefills once: decode continues after the measured prefill, and each keystroke's
previous request reuses its prefix, as it would in an editor (at 0.5B a prefill
is the minutes of a round).

Several weight formats of tabd (`--engines-weights fp32,bf16,int8`) and GGUF
types of llama.cpp (`--engines-gguf-types f32,f16,q8_0`) run side by side in one
run; each tabd format's ratio is taken against the best llama.cpp worker for
that figure (`llamacpp_best` says which).

`--shape NAME` runs a model shape instead of the embedded model: random weights
at Qwen2.5-Coder 0.5B's or 1.5B's configuration (shapes.py, built once without
the hub). Larger shapes run at 1024 context (prefill_per_1k; prefill_cpu_per_1k
is the same prefill's CPU time, all the worker's threads: on a machine others
share, compare it at --engines-threads 1, where time slices lost to other
processes are not counted). Beside the
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

from tabd.predictor.bench import exits
from tabd.predictor.loading.engine_names import TORCH, TORCH_NATIVE

CONTEXT = 2048
DECODE = 16
LOOKUP_PASSES = 5  # times over the lookup session's states: medians, the machine's noise is larger than one pass
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
    g.add_argument("--engines-weights", metavar="LIST", type=_weights_list,
                   help="tabd weight formats side by side, e.g. fp32,bf16,int8 (default: --weights)")
    g.add_argument("--engines-gguf-types", metavar="LIST", type=_gguf_types, default=("f32",),
                   help=f"llama.cpp GGUF types side by side, from {','.join(GGUF_TYPES)} (default f32)")
    g.add_argument("--engines-lookup-passes", type=int, default=1, metavar="N",
                   help="times over the prompt-lookup session after the rounds (default 1; 0: skip it, as at 1.5B "
                        "where it takes minutes; `tabd bench lookup` measures it alone)")
    g.add_argument("--engines-progress", action="store_true", help="say on stderr what each worker took")
    g.add_argument("--engines-flash", choices=("both", "on", "off"), default="both",
                   help="llama.cpp with flash attention, without, or both (default both)")


GGUF_TYPES = ("f32", "f16", "bf16", "q8_0")
WEIGHTS = ("auto", "fp32", "bf16", "int8")


def _listed(value: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    items = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    bad = [v for v in items if v not in allowed]
    if not items or bad:
        raise argparse.ArgumentTypeError(f"{what}: {', '.join(bad) or 'none given'}; use {','.join(allowed)}")
    return items


def _weights_list(value: str) -> tuple[str, ...]:
    return _listed(value, WEIGHTS, "weight formats")


def _gguf_types(value: str) -> tuple[str, ...]:
    return _listed(value, GGUF_TYPES, "GGUF types")


def token_ids(tokenizer, n: int) -> list[int]:
    text = "".join(p.read_text() for p in sorted(SAMPLES.glob("*.py")))
    ids = tokenizer.encode(text, add_special_tokens=False)
    while len(ids) < n:
        ids = ids + ids
    return ids[:n]


# -- workers: one engine each, one round per command ------------------------------


def repetitive_states(every: int = 0) -> list[tuple[str, str]]:
    """A file that repeats its own lines (a table of similar methods), typed through its second half, as a
    session replayed. every=0: the state at the end of each line, the rest of the file after the cursor.
    every=N: a request every N characters (mid-line, as while typing), the file written up to there and
    nothing after the cursor but a newline (new code that repeats a pattern above it)."""
    body = "".join(f"    def get_{n}(self):\n        return self.data.get('{n}', None)\n\n"
                   for n in ("name", "path", "size", "mode", "user", "group", "owner", "inode"))
    text = "class Record:\n" + body
    if every:
        return [(text[:cut], "\n") for cut in range(len(text) // 2, len(text), every)]
    ends = [i + 1 for i, c in enumerate(text) if c == "\n"]
    return [(text[:cut], text[cut:]) for cut in ends[len(ends) // 2 :]]


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class TabdEngine:
    def __init__(self, model_dir: str | None, threads: int, engine: str = TORCH_NATIVE, weights: str = "auto") -> None:
        import torch

        from tabd.predictor.backends.local import LocalBackend
        from tabd.predictor.backends.backend_settings import LocalSettings

        self.backend = LocalBackend(LocalSettings(model_dir, device="cpu", threads=threads, engine=engine, weights=weights))
        torch.set_num_threads(threads)
        self.runner = self.backend.runner
        self.cache, self.held, self.logits = None, [], None  # the KV a round carries on, and the ids it holds

    def prefill_ms(self, ids: list[int]) -> float:
        from tabd.predictor.engine import generate

        t0 = time.perf_counter()
        self.cache = self.backend.runner.new_cache(len(ids) + 2 * DECODE + 8)
        self.logits = generate.prefill(self.runner, ids, self.cache, len(ids))  # one chunk: nothing to pre-empt
        self.held = list(ids)
        return (time.perf_counter() - t0) * 1000

    def decode_ms(self) -> float:
        """Median of one-token steps after the prefill just measured."""
        from tabd.predictor.engine import generate

        token = generate.greedy(self.logits)
        times = []
        for _ in range(DECODE):
            t0 = time.perf_counter()
            self.held.append(token)
            token = generate.greedy(generate.decode_one_token(self.runner, token, self.cache))
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)

    def _request(self, ids: list[int]) -> None:
        """A request for `ids` on the cache as it is (its common prefix reused), decoding DECODE tokens."""
        from tabd.predictor.engine import generate
        from tabd.predictor.engine.slots import common_prefix

        keep = min(common_prefix(self.held, ids), len(ids) - 1)
        self.cache.truncate(keep)
        logits = generate.prefill(self.runner, ids[keep:], self.cache)
        self.held = list(ids)
        generate.decode_n_tokens(self.runner, logits, self.cache, generate.Rule(DECODE), self.held.append)

    def keystroke(self, old: list[int], new: list[int]) -> tuple[float, float]:
        """(first token ms, 16 tokens ms) for `new` when the cache holds `old` and what was decoded after it."""
        from tabd.predictor.engine import generate
        from tabd.predictor.engine.slots import common_prefix

        self._request(old)  # the previous request (a prefix of what the cache holds: little to run)
        t0 = time.perf_counter()
        keep = min(common_prefix(self.held, new), len(new) - 1)
        self.cache.truncate(keep)
        logits = generate.prefill(self.runner, new[keep:], self.cache)
        generate.greedy(logits)
        t1 = time.perf_counter()
        self.held = list(new)
        generate.decode_n_tokens(self.runner, logits, self.cache, generate.Rule(DECODE), self.held.append)
        t2 = time.perf_counter()
        return (t1 - t0) * 1000, (t2 - t0) * 1000

    def lookup(self, passes: int = LOOKUP_PASSES, every: int = 0) -> dict:
        """Prompt-lookup decoding on a self-repeating file, `passes` times over its states, on and off alternating
        (the order flips state by state and pass by pass, so both see the machine's noise): per pass the decode
        time both ways, and the time after the prefill (decode and the copy candidate's verification, which
        lookup's multi-token passes also run); medians over the passes, the same text and tokens checked."""
        from tabd.predictor.types import GenSettings, Query

        settings = GenSettings(max_new_tokens=DECODE, multiline=True)
        b = self.backend
        default = b.lookup
        states = repetitive_states(every)
        runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}  # per pass: (decode ms, after prefill ms)
        tokens = accepted = passes_on = 0
        same = True
        for r in range(max(1, passes)):
            sums = {True: [0.0, 0.0], False: [0.0, 0.0]}
            for i, (prefix, suffix) in enumerate(states):
                out = {}
                for on in (True, False) if (i + r) % 2 == 0 else (False, True):
                    b.lookup = on
                    t0 = time.perf_counter()
                    p = b.predict(Query(prefix, suffix, settings, slot_id=f"lookup-{on}"))
                    whole = (time.perf_counter() - t0) * 1000
                    out[on] = (p.text, list(b.last_tokens))
                    sums[on][0] += p.decode_ms
                    sums[on][1] += whole - p.prefill_ms
                    if on and r == 0:
                        tokens, accepted, passes_on = tokens + p.decode_tokens, accepted + p.accepted_drafts, passes_on + p.decode_passes
                same = same and out[True] == out[False]
            for on in (True, False):
                runs[on].append((sums[on][0], sums[on][1]))
        b.lookup = default
        med = {on: [statistics.median(x[k] for x in runs[on]) for k in (0, 1)] for on in (True, False)}
        return {"states": len(states), "passes_over_states": max(1, passes), "tokens": tokens,
                "accepted_drafts": accepted, "passes": passes_on,
                "tokens_per_pass": round(tokens / max(1, passes_on), 2),
                "accepted_per_pass": round(accepted / max(1, passes_on), 2),
                "decode_ms_lookup": round(med[True][0], 1), "decode_ms_plain": round(med[False][0], 1),
                "speedup": round(med[False][0] / max(1e-9, med[True][0]), 2),
                "after_prefill_ms_lookup": round(med[True][1], 1), "after_prefill_ms_plain": round(med[False][1], 1),
                "ms_per_token_lookup": round(med[True][1] / max(1, tokens), 3),
                "ms_per_token_plain": round(med[False][1] / max(1, tokens), 3),
                "speedup_after_prefill": round(med[False][1] / max(1e-9, med[True][1]), 2),
                "speedups_by_pass": [round(off[1] / max(1e-9, on[1]), 2) for on, off in zip(runs[True], runs[False])],
                # decode off / on within each pass (the two alternate state by state there, so they see the same
                # load) and their median: steadier under other jobs' load than the ratio of the two medians
                "decode_speedups_by_pass": [round(off[0] / max(1e-9, on[0]), 2) for on, off in zip(runs[True], runs[False])],
                "decode_speedup_paired": round(statistics.median(
                    off[0] / max(1e-9, on[0]) for on, off in zip(runs[True], runs[False])), 2),
                "same_output": same}


class LlamaCppEngine:
    def __init__(self, gguf: str, threads: int, flash: bool) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=gguf, n_ctx=CONTEXT + 16, n_threads=threads, n_threads_batch=threads,
                         n_batch=CONTEXT, flash_attn=flash, verbose=False, logits_all=False)

    def prefill_ms(self, ids: list[int]) -> float:
        self.llm.reset()
        self.ids = ids
        t0 = time.perf_counter()
        self.llm.eval(ids)
        return (time.perf_counter() - t0) * 1000

    def decode_ms(self) -> float:
        """Median of one-token steps after the prefill just measured."""
        times = []
        for i in range(DECODE):  # which tokens does not change the time; the prompt's own, as before
            t0 = time.perf_counter()
            self.llm.eval([self.ids[i]])
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
        self._generate(old, DECODE)  # the previous request (its prefix reused by generate()): prompt and output cached
        return self._generate(new, DECODE)


def run_round(eng, ids: list[int], context: int = CONTEXT) -> dict:
    """One round, one long prefill: decode and both keystrokes go on from the KV it leaves."""
    out = {"prefill_512": eng.prefill_ms(ids[:512])} if context >= 2048 else {}
    n = context - DECODE
    cpu = time.process_time()
    ms = eng.prefill_ms(ids[:n])
    cpu = (time.process_time() - cpu) * 1000  # the worker's CPU time, all its threads (a spinning wait counted too)
    out.update({f"prefill_{context}": ms, "prefill_per_1k": ms * 1000 / n, "prefill_cpu_per_1k": cpu * 1000 / n})
    decode = eng.decode_ms()
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
    p.add_argument("--worker", required=True)  # tabd[:WEIGHTS], tabd-torch, llamacpp[-fa]
    p.add_argument("--model")
    p.add_argument("--gguf")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--context", type=int, default=CONTEXT)
    p.add_argument("--weights", default="auto")
    p.add_argument("--ids", required=True)
    p.add_argument("--lookup-passes", type=int, default=1)
    a = p.parse_args(argv)
    ids = json.loads(Path(a.ids).read_text())
    if a.worker.startswith("tabd"):
        eng = TabdEngine(a.model, a.threads, TORCH if a.worker == "tabd-torch" else TORCH_NATIVE, a.weights)
    else:
        eng = LlamaCppEngine(a.gguf, a.threads, flash=a.worker == "llamacpp-fa")
    run_round(eng, ids, 128)  # warm-up, short: at 0.5B a full round takes a minute
    label = eng.backend.engine_name if isinstance(eng, TabdEngine) else a.worker
    print("ready", label, flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "round":
            print(json.dumps(run_round(eng, ids, a.context)), flush=True)
        elif command in ("extras", "memory") and isinstance(eng, TabdEngine):  # once, after the rounds
            print(json.dumps({"rss_bytes": rss_bytes(), "weights": eng.backend.weights_why,
                              "weight_bytes_held": eng.runner.weight_bytes(), "prefill_chunk": eng.backend.prefill_chunk,
                              "prefill_kernels": _prefill_kernels(eng.runner),
                              **({"lookup": _lookup_or_skip(eng, a.lookup_passes)} if command == "extras" else {})}),
                  flush=True)
        else:
            break
    return 0


def _prefill_kernels(runner) -> str:
    """What ran the measured prefill: the engine says, where it can."""
    say = getattr(runner, "prefill_kernels", None)
    return say() if say is not None else type(runner).__name__


def _lookup_or_skip(eng: TabdEngine, passes: int) -> dict:
    return eng.lookup(passes) if passes > 0 else {"skipped": "--engines-lookup-passes 0"}


# -- the parent ---------------------------------------------------------------------


def _gguf_path(args, model_dir: Path, outtype: str = "f32") -> Path:
    given = args.engines_gguf
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
    cached = gguf.CACHE / f"tabd-{outtype}-{stamp}.gguf"  # converted once per set of weights and type
    if cached.exists():
        return cached
    return Path(gguf.convert(model_dir, cached, outtype))


def _llamacpp(args, model_dir: Path) -> tuple[dict[str, Path], str]:
    """({GGUF type: file} for llama.cpp, "") or ({}, the one line saying why llama.cpp cannot run)."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return {}, "llama.cpp is not installed (make bench-deps builds it once, 10-48 minutes)"
    types = ("given",) if args.engines_gguf else args.engines_gguf_types
    try:
        return {t: _gguf_path(args, model_dir, t) for t in types}, ""
    except (OSError, RuntimeError) as exc:  # no converter here, or it failed: one line, not a traceback
        return {}, f"cannot make the model's GGUF for llama.cpp: {exc}"


def _workers(args, ggufs: dict[str, Path]) -> list[tuple[str, str, str]]:
    """(name, --worker, weights or GGUF file) for every worker of the run, tabd's first."""
    weights = args.engines_weights or (args.weights,)
    out = [("tabd" if i == 0 else f"tabd:{w}", "tabd", w) for i, w in enumerate(weights)]
    if args.engines_torch:
        out.append(("tabd-torch", "tabd-torch", weights[0]))
    flash = {"both": ("llamacpp", "llamacpp-fa"), "on": ("llamacpp-fa",), "off": ("llamacpp",)}[args.engines_flash]
    for i, (kind, path) in enumerate(ggufs.items()):
        out += [(w if i == 0 else f"{w}:{kind}", w, str(path)) for w in flash]
    return out


def _start(name: str, cmd: list[str], threads: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    line = proc.stdout.readline()
    word, _, label = line.strip().partition(" ")
    if word != "ready":
        if line:  # it wrote something else: a worker of another version, or a stray print
            proc.kill()
            raise RuntimeError(f"the {name} worker wrote {line.strip()[:200]!r} instead of 'ready'")
        raise RuntimeError(exits.ended(name, proc))
    return proc, label


def _ask(name: str, proc: subprocess.Popen, command: str) -> dict:
    try:
        proc.stdin.write(command + "\n")
        proc.stdin.flush()
    except BrokenPipeError:
        raise RuntimeError(exits.ended(name, proc)) from None
    line = proc.stdout.readline()
    if not line:  # it died during the round: say how (a kernel it reached only now can be the illegal one)
        raise RuntimeError(exits.ended(name, proc))
    return json.loads(line)


def run_section(args: argparse.Namespace) -> dict:
    from tabd.predictor.bench import shapes

    shape = args.shape
    model_dir = Path(args.model or shapes.model_dir(shape))
    context = CONTEXT if shape == "embedded" else 1024  # a 2k prefill at 0.5B takes half a minute here
    ggufs, why = _llamacpp(args, model_dir)
    from tabd.predictor.loading.fastload import tokenizer_for

    cfg = json.loads((model_dir / "config.json").read_text())
    ids = token_ids(tokenizer_for(model_dir, cfg.get("model_type", "llama")), context)
    threads = args.engines_threads
    import tempfile

    def say(line: str) -> None:
        if args.engines_progress:
            print(f"bench engines: {line}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="tabd-engines-") as tmp:
        ids_file = Path(tmp) / "ids.json"
        ids_file.write_text(json.dumps(ids))
        workers, labels, extras, formats = {}, {}, {}, {}
        for name, kind, what in _workers(args, ggufs):
            formats[name] = what  # one at a time: a 1.5B shape is 6 GB of fp32 while it loads
            cmd = [sys.executable, "-m", "tabd.predictor.bench.engines", "--worker", kind, "--ids", str(ids_file),
                   "--threads", str(threads), "--model", str(model_dir), "--context", str(context),
                   "--weights", what if kind.startswith("tabd") else "auto",
                   "--gguf", what if kind.startswith("llamacpp") else "",
                   "--lookup-passes", str(args.engines_lookup_passes)]
            t0 = time.perf_counter()
            workers[name], labels[name] = _start(name, cmd, threads)
            say(f"{name} ready in {time.perf_counter() - t0:.0f} s")
        rounds: dict[str, list[dict]] = {name: [] for name in workers}
        for r in range(args.engines_rounds):
            order = list(workers) if r % 2 == 0 else list(reversed(workers))
            for name in order:
                t0 = time.perf_counter()
                rounds[name].append(_ask(name, workers[name], "round"))
                say(f"round {r + 1} {name} {time.perf_counter() - t0:.0f} s {json.dumps(rounds[name][-1])}")
        for name in workers:  # prompt lookup once, for the first format: the others' memory only
            if name.startswith("tabd") and name != "tabd-torch":
                extras[name] = _ask(name, workers[name], "extras" if name == "tabd" else "memory")
        for proc in workers.values():
            proc.stdin.close()
            proc.wait(timeout=60)
    med = {name: {k: round(statistics.median(r[k] for r in rs), 2) for k in rs[0]} for name, rs in rounds.items()}
    report = _tabd_report(med, extras, formats, shapes.weight_bytes(model_dir))
    report.update({"shape": shape, "tabd_engine": labels["tabd"], "threads": threads, "context": context})
    if not ggufs:
        report["llamacpp"] = f"unavailable: {why}"
        raise PartialReport(f"{why}; tabd's figures are absolute, the ratios could not be measured", report)
    report.update(_ratios(med, ggufs, formats))
    report.update(_torch_columns(med, {k: report["llamacpp_best"][k]["ms"] for k in med["tabd"]}))
    return report


def _tabd_report(med: dict, extras: dict, formats: dict[str, str], file_bytes: int) -> dict:
    """tabd's medians (the first weight format as "tabd", every one under tabd_by_weights) and its memory."""
    first = extras["tabd"]
    report = {"tabd": med["tabd"], "weights": first["weights"], "rss_bytes": first["rss_bytes"],
              "weights_file_bytes": file_bytes, "rss_over_weights_file": round(first["rss_bytes"] / max(1, file_bytes), 2),
              "weight_bytes_held": first["weight_bytes_held"], "prefill_chunk": first["prefill_chunk"],
              "prefill_kernels": first.get("prefill_kernels"), "lookup": first["lookup"]}
    if len(extras) > 1:
        report["tabd_by_weights"] = {
            formats[name]: {**med[name], "weights": e["weights"], "rss_bytes": e["rss_bytes"],
                                      "rss_over_weights_file": round(e["rss_bytes"] / max(1, file_bytes), 2),
                                      }
            for name, e in extras.items()}
    return report


def _ratios(med: dict, ggufs: dict[str, Path], formats: dict[str, str]) -> dict:
    """llama.cpp's medians, its best worker per figure, and each tabd format's ratio to that best."""
    cpp = {name: m for name, m in med.items() if name.startswith("llamacpp")}
    keys = list(med["tabd"])
    best = {k: min(((m[k], name) for name, m in cpp.items()), key=lambda x: x[0]) for k in keys}
    out = {"llamacpp_best": {k: {"ms": ms, "worker": name} for k, (ms, name) in best.items()},
           "ratios": {k: round(med["tabd"][k] / best[k][0], 2) for k in keys},
           "gguf": {kind: path.name for kind, path in ggufs.items()}, "llamacpp_workers": cpp}
    if "llamacpp" in cpp:
        out["llamacpp"] = cpp["llamacpp"]
    if "llamacpp-fa" in cpp:
        out["llamacpp_flash_attn"] = cpp["llamacpp-fa"]
    tabds = [n for n in med if n.startswith("tabd") and n != "tabd-torch"]
    if len(tabds) > 1:
        out["ratios_by_weights"] = {formats[n]: {k: round(med[n][k] / best[k][0], 2) for k in keys} for n in tabds}
    return out


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
