"""`tabd bench preempt`: how long a request the user waits for queues behind a prefetch that is prefilling, through LSP.

One `tabd serve` child (a real server over stdio, spoken to by a minimal
JSON-RPC client) holds a long document A and a short one B. Each round:

1. B alone, the daemon idle: the client's latency for B's suggestion;
2. A cold, in the foreground: its completion line in the serve log gives the
   prefill's ms per token, so one chunk's time (the chunk the engine uses for
   a model this size, `chunking.chunk_for`);
3. A's answer starts prefetches (`--fixed-depth --depth 1`). The server runs
   with `--no-kv-reuse`, so each of them prefills A's whole prompt again, as a
   prefetch whose prompt changed would; once the log says one started, and
   half a chunk later (mid-chunk), B is asked at a new state.

The figure is B's `queue_ms` (enqueue to start on the model worker, from the
log) against one chunk's time: the target is a wait of at most one chunk.
B's extra client latency over B alone is reported beside it (the server runs
with `--debounce-ms 0`: the wait measured is the worker's, not a debounce). With `--shape`
(e.g. qwen2.5-coder-0.5b) the model is that shape's random weights.
"""
from __future__ import annotations

import argparse
import json
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

from tabd.daemon.bench.soak import Client
from tabd.predictor.engine.chunking import chunk_for

SAMPLES = Path(__file__).resolve().parents[2] / "predictor" / "samples"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("preempt section")
    g.add_argument("--preempt-rounds", type=int, default=2, help="rounds (default 2; one cold prefill each)")
    g.add_argument("--preempt-chars", type=int, default=6000, help="characters of document A before the cursor (default 6000)")
    g.add_argument("--preempt-log", metavar="FILE", help="keep the server's log there (default: a temporary file)")


def parameters(model_dir: Path) -> int:
    """Weights in the model's safetensors, each tensor once, read from the headers (no torch)."""
    total = 0
    for path in sorted(model_dir.glob("*.safetensors")):
        with path.open("rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        for name, info in header.items():
            if name != "__metadata__":
                count = 1
                for d in info["shape"]:
                    count *= d
                total += count
    return total


def long_text(chars: int) -> str:
    text = "".join(p.read_text() for p in sorted(SAMPLES.glob("*.py")))
    while len(text) < chars:
        text += text
    return text[:chars]


def _end(text: str) -> dict:
    lines = text.split("\n")
    return {"line": len(lines) - 1, "character": len(lines[-1].encode("utf-16-le")) // 2}


class Session:
    """The server child, its documents and its log, for one bench run."""

    def __init__(self, cmd: list[str], log: Path, chars: int) -> None:
        self.client = Client(cmd)
        self.log, self.seen, self.pending = log, 0, []
        self.client.call("initialize", {"processId": None, "rootUri": None, "capabilities": {},
                                        "initializationOptions": {"prefixChars": chars + 100}})
        self.client.notify("initialized", {})
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}

    def set(self, uri: str, text: str) -> None:
        if uri not in self.versions:
            self.versions[uri] = 1
            self.client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python",
                                                                         "version": 1, "text": text}})
        else:
            self.versions[uri] += 1
            self.client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": self.versions[uri]},
                                                          "contentChanges": [{"text": text}]})
        self.texts[uri] = text

    def ask(self, uri: str) -> float:
        """Client-measured ms for an inline completion at the end of the document."""
        t0 = time.perf_counter()
        self.client.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": _end(self.texts[uri]),
                                                           "context": {"triggerKind": 2}})
        return (time.perf_counter() - t0) * 1000

    def events(self) -> list[dict]:
        """Log lines written since the last call (the log is written after each answer, from the server)."""
        if not self.log.exists():
            return []
        lines = self.log.read_text().splitlines()
        new, self.seen = lines[self.seen :], len(lines)
        return [json.loads(line) for line in new if line.strip()]

    def drain(self) -> None:
        self.pending = []
        self.events()

    def wait_for(self, match, timeout: float = 120.0) -> dict | None:
        """The next log line that matches (the lines before it are passed over, those after it kept)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.pending):
                if match(event):
                    self.pending = self.pending[i + 1 :]
                    return event
            self.pending = []
            if time.monotonic() > deadline:
                return None
            time.sleep(0.01)
            self.pending = self.events()


def _background(s: Session, r: int, a_text: str, chunk_ms: float) -> str:
    """Background work prefilling A's whole prompt: the prefetches A's answer started, or (when it had no
    suggestion to prefetch after, as random weights give) a KV warm-up of A at a cold state (tabd/focus)."""
    if s.wait_for(lambda e: e.get("event") == "prefetch" and e.get("outcome") == "started", timeout=2.0):
        return "prefetch"
    s.set("file:///bench/a.py", f"# warm {r}\n" + a_text)  # changed at the top: none of the KV is reused
    s.client.notify("tabd/focus", {"uri": "file:///bench/a.py", "position": _end(s.texts["file:///bench/a.py"])})
    return "warmup"


def _round(s: Session, r: int, a_text: str, chunk: int) -> dict:
    s.set("file:///bench/b.py", f"def add_{r}(a, b):\n    # plain sum\n    return ")
    s.drain()
    alone = s.ask("file:///bench/b.py")
    s.wait_for(lambda e: e.get("event") == "completion")
    s.set("file:///bench/a.py", f"# round {r}\n" + a_text)  # changed at the top: a cold prefill
    s.ask("file:///bench/a.py")
    cold = s.wait_for(lambda e: e.get("event") == "completion")  # the log names documents by a hash: the next one is A's
    if cold is None:
        return {"error": "no completion line for A in the serve log"}
    chunk_ms = cold["prefill_ms"] * min(chunk, cold["prefill_tokens"]) / max(1, cold["prefill_tokens"])
    kind = _background(s, r, a_text, chunk_ms)
    # into the background prefill's second chunk, or half-way through it when it is one chunk (the embedded model)
    time.sleep(chunk_ms * (1.5 if cold["prefill_tokens"] > 2 * chunk else 0.5) / 1000)
    s.set("file:///bench/b.py", f"def mul_{r}(a, b):\n    # plain product\n    return ")
    behind = s.ask("file:///bench/b.py")
    line = s.wait_for(lambda e: e.get("event") == "completion")
    if line is None:
        return {"chunk_ms": round(chunk_ms, 1), "error": "no completion line for B in the serve log"}
    return {"background": kind, "chunk_ms": round(chunk_ms, 1), "cold_prefill_tokens": cold["prefill_tokens"],
            "b_alone_ms": round(alone, 1), "b_behind_ms": round(behind, 1), "b_queue_ms": line["queue_ms"],
            "queue_over_chunk": round(line["queue_ms"] / max(1e-9, chunk_ms), 2)}


def measure(model_dir: Path, extra: list[str], rounds: int, chars: int, keep_log: str | None = None) -> dict:
    chunk = chunk_for(parameters(model_dir))
    with tempfile.TemporaryDirectory(prefix="tabd-preempt-") as tmp:
        log = Path(keep_log) if keep_log else Path(tmp) / "serve.jsonl"
        cmd = [sys.executable, "-m", "tabd.daemon", "serve", "--model", str(model_dir), "--no-kv-reuse", "--fixed-depth",
               "--depth", "1", "--min-confidence", "0", "--no-context", "--debounce-ms", "0", "--max-new-tokens", "4",
               "--log", str(log), *extra]
        s = Session(cmd, log, chars)
        try:
            while s.client.call("tabd/stats", {}).get("model") == "loading":
                time.sleep(0.1)
            a_text = long_text(chars)
            rows = [_round(s, r, a_text, chunk) for r in range(rounds)]
            stats = s.client.call("tabd/stats", {})
        finally:
            s.client.close()
    ok = [row for row in rows if "error" not in row]
    report: dict = {"chunk_tokens": chunk, "rounds": rows, "prefetch": stats.get("prefetch", {}),
                    "warmups": stats.get("context", {}).get("warmups", stats.get("warmups", {}))}
    if ok:
        report.update({key: round(statistics.median(row[key] for row in ok), 2)
                       for key in ("chunk_ms", "b_alone_ms", "b_behind_ms", "b_queue_ms", "queue_over_chunk")})
    return report


def run_section(args: argparse.Namespace) -> dict:
    from tabd.predictor.bench import shapes

    model_dir = Path(args.model or shapes.model_dir(args.shape))
    extra = ["--threads", str(args.threads)] if args.threads else []
    if args.weights:
        extra += ["--weights", args.weights]
    report = measure(model_dir, extra, args.preempt_rounds, args.preempt_chars, args.preempt_log)
    report["shape"] = args.shape
    if "b_queue_ms" not in report:
        raise _partial("no round had background work prefilling to pre-empt", report)
    return report


def _partial(message: str, report: dict) -> RuntimeError:
    exc = RuntimeError(message)
    exc.report = report  # type: ignore[attr-defined]
    return exc
