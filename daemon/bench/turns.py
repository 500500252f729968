"""`tabd bench documents`: documents edited in turn at a real model's size, through LSP (issue 43).

One `tabd serve` child per part (a real server over stdio, the minimal client
of `bench soak`), at a shape's random weights (`--shape`, as `bench engines`
builds them) or `--model`. What each figure is, from the client's clock and
the server's log (its completion lines name documents by a hash of the URI):

- overlap: document A's cold request (DOC_CHARS before the cursor, its prefill
  budget OVERLAP_BUDGET_MS: a long prefill, which still ends within the
  server's request limit), and OVERLAP_S later one in document B. B's wait behind A (`b_wait_ms`: its queue_ms, the time from being
  queued to starting on the model worker) against one prefill chunk's time;
  A's answer still comes, and how much of its prompt it took from the KV it
  had computed before B pre-empted it (`a_reused_tokens`).
- cold: FILES cold documents of DOC_CHARS, the default budget: the client's time
  to the first suggestion in each (and from the server's log, the wait it took from
  its budget, `first_wait_ms`, and its window, `first_window_chars`), and the keystroke KEY_GAP_S after it: the
  share of its prompt reused (`keystroke_reuse`) and its window (`window_chars`).
- turns (for each N of `--docs-count`): N documents edited in turn, KEYS
  keystrokes each, a pass cold and then a pass warm: each request's wait behind
  others (queue_ms + paused_ms), its latency at the client, and the share of
  keystrokes whose prompt came mostly (>= REUSED) from kept KV.

`--json` prints one object on its last line. Wall-clock figures depend on the
machine and on what else runs on it: say which when quoting them.
"""
from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tabd.daemon.bench.preempt import Session, long_text, parameters
from tabd.predictor.engine.chunking import chunk_for, chunk_within

DOC_CHARS = 6000
OVERLAP_S = 0.3  # B is asked this long after A (the figure)
# A's prefill bound in the overlap part: long enough to be pre-empted mid-way, short enough that A, paused behind B,
# still answers within the server's 30 s request limit on a slow machine (0.5B: ~25 ms a token here, 1 thread)
OVERLAP_BUDGET_MS = 10_000
KEY_GAP_S = 0.2  # a keystroke this long after the answer before it (a person's pace)
REUSED = 0.9  # a keystroke "reused the KV" when at least this share of its prompt was kept
SERVE_FLAGS = ["--min-confidence", "0", "--debounce-ms", "0", "--no-context"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("documents section")
    g.add_argument("--docs-count", default="2,4", help="documents edited in turn, a comma list (default 2,4)")
    g.add_argument("--docs-keys", type=int, default=3, help="keystrokes per document per turn (default 3)")
    g.add_argument("--docs-files", type=int, default=5, help="cold files for the first-suggestion figure (default 5)")
    g.add_argument("--docs-chars", type=int, default=DOC_CHARS, help=f"characters per document (default {DOC_CHARS})")
    g.add_argument("--docs-parts", default="overlap,cold,turns", help="which parts (default overlap,cold,turns)")
    g.add_argument("--docs-overlap-budget-ms", type=int, default=OVERLAP_BUDGET_MS,
                   help=f"A's prefill budget in the overlap part (default {OVERLAP_BUDGET_MS}; 0: the whole window)")
    g.add_argument("--docs-log", metavar="DIR", help="keep the servers' logs there (default: a temporary folder)")


def doc_hash(uri: str) -> str:
    """The document's name in the log (lsp/server.py doc_id)."""
    return hashlib.blake2b(uri.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def text_for(i: int, chars: int) -> str:
    """A document of about `chars` characters, different for each i (a rotation of the sample code), ending a line."""
    base = long_text(chars * 3)
    start = (i * 7919) % max(1, len(base) - chars)
    start = base.find("\n", start) + 1
    body = f"# document {i}\n" + base[start : start + chars]
    return body[: body.rfind("\n") + 1] + f"value_{i} = "


def end_of(text: str) -> dict:
    lines = text.split("\n")
    return {"line": len(lines) - 1, "character": len(lines[-1].encode("utf-16-le")) // 2}


class Server(Session):
    """Session with requests in flight side by side and log lines matched by document."""

    def start(self, uri: str) -> int:
        return self.client.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": end_of(self.texts[uri]), "context": {"triggerKind": 2}})

    def timed(self, uri: str) -> tuple[float, dict]:
        t0 = time.perf_counter()
        reply = self.client.reply(self.start(uri))
        return (time.perf_counter() - t0) * 1000, reply

    def line_for(self, uri: str, timeout: float = 300.0) -> dict | None:
        doc = doc_hash(uri)
        return self.wait_for(lambda e: e.get("event") == "completion" and e.get("doc") == doc, timeout)

    def lines_for(self, uris: list[str], timeout: float = 30.0) -> dict:
        """The next completion line of each of `uris`, whatever their order ("order": the uris as answered)."""
        names = {doc_hash(u): u for u in uris}
        got: dict = {"order": []}
        deadline = time.monotonic() + timeout
        while len(got) <= len(uris) and time.monotonic() < deadline:
            line = self.wait_for(lambda e: e.get("event") == "completion" and e.get("doc") in names,
                                 deadline - time.monotonic())
            if line is None:
                break
            uri = names[line["doc"]]
            if uri not in got:
                got[uri] = line
                got["order"].append(uri)
        return got

    def type_key(self, uri: str, key: str) -> None:
        self.set(uri, self.texts[uri] + key)

    def loaded(self) -> None:
        while self.client.call("tabd/stats", {}).get("model") == "loading":
            time.sleep(0.1)


def computed(line: dict) -> bool:
    """The model ran for this request (shown or not: random weights' suggestions are often gated away)."""
    return line.get("origin") == "model" and line.get("prefill_tokens", 0) + line.get("reused_tokens", 0) > 0


def _reuse(line: dict) -> float:
    total = line.get("prefill_tokens", 0) + line.get("reused_tokens", 0)
    return line.get("reused_tokens", 0) / total if total else 0.0


def _p50(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def _start(model_dir: Path, extra: list[str], log: Path, chars: int) -> Server:
    cmd = [sys.executable, "-m", "tabd.daemon", "serve", "--model", str(model_dir), "--log", str(log), *SERVE_FLAGS,
           *extra]
    s = Server(cmd, log, chars)
    s.loaded()
    return s


def overlap(model_dir: Path, extra: list[str], log: Path, chars: int, chunk: int, budget_ms: int) -> dict:
    s = _start(model_dir, ["--max-prompt-ms", str(budget_ms), *extra], log, chars)
    try:
        a, b = "file:///bench/overlap_a.py", "file:///bench/overlap_b.py"
        s.set(b, "def add(a, b):\n    return ")
        s.timed(b)  # the model's first run, away from the figure
        s.line_for(b)
        s.set(a, text_for(0, chars))
        s.type_key(b, "a")
        s.drain()
        t0 = time.perf_counter()
        a_id = s.start(a)
        time.sleep(OVERLAP_S)
        t_b = time.perf_counter()
        b_reply = s.client.reply(s.start(b), timeout=600)
        b_ms = (time.perf_counter() - t_b) * 1000
        a_reply = s.client.reply(a_id, timeout=600)
        a_ms = (time.perf_counter() - t0) * 1000
        lines = s.lines_for([a, b])
        a_line, b_line = lines.get(a), lines.get(b)
        order = lines.get("order", [])
    finally:
        s.client.close()
    if a_line is None or b_line is None:
        return {"error": "no completion line for " + " and ".join(n for n, v in (("A", a_line), ("B", b_line)) if v is None)}
    # one chunk's time, from A's prefill after it resumed, as the server sizes it (none where B came only once A
    # was decoding)
    tokens = a_line["prefill_tokens"]
    per_token = a_line["prefill_ms"] / tokens if tokens >= 64 else None
    chunk = chunk_within(chunk, per_token) if per_token else chunk
    return {"chunk_tokens": chunk, "chunk_ms": round(per_token * chunk, 1) if per_token else None,
            "a_budget_ms": budget_ms, "b_wait_ms": b_line["queue_ms"],
            "b_latency_ms": round(b_ms, 1), "b_shown": bool(b_reply.get("result", {}).get("items")),
            "a_latency_ms": round(a_ms, 1), "a_shown": bool((a_reply.get("result") or {}).get("items")), "a_preemptions": a_line.get("preemptions", 0),
            "a_paused_ms": a_line.get("paused_ms", 0.0), "a_reused_tokens": a_line["reused_tokens"],
            "a_prefill_tokens": a_line["prefill_tokens"], "b_answered_first": order[:1] == [b]}


def cold(model_dir: Path, extra: list[str], log: Path, chars: int, files: int) -> dict:
    s = _start(model_dir, extra, log, chars)
    firsts, reuse, windows, keystroke_ms, whole = [], [], [], [], []
    first_waits, first_windows = [], []  # the first request's wait taken from its budget, and the window it ran on
    try:
        for i in range(files):
            uri = f"file:///bench/cold_{i}.py"
            s.set(uri, text_for(10 + i, chars))
            s.drain()
            first_ms, _ = s.timed(uri)
            first = s.line_for(uri)
            time.sleep(KEY_GAP_S)
            s.type_key(uri, "(")
            key_ms, _ = s.timed(uri)
            key = s.line_for(uri)
            if first is None or key is None:
                continue
            firsts.append(first_ms)
            keystroke_ms.append(key_ms)
            if computed(first):
                first_waits.append(first.get("wait_ms", 0.0))
                first_windows.append(first.get("window_chars", 0))
            if computed(key):
                reuse.append(_reuse(key))
                windows.append(key.get("window_chars", 0))
                whole.append(key.get("window_chars", 0) >= 0.9 * chars)  # the whole window, not the short one
    finally:
        s.client.close()
    return {"files": files, "first_ms": [round(v, 1) for v in firsts], "first_p50_ms": _p50(firsts),
            "first_wait_ms": [round(v, 1) for v in first_waits], "first_window_chars": first_windows,
            "keystroke_ms_p50": _p50(keystroke_ms), "keystroke_reuse": [round(r, 4) for r in reuse],
            "keystroke_reuse_p50": round(statistics.median(reuse), 4) if reuse else None,
            "keystroke_window_chars": windows, "keystroke_whole_window": sum(whole)}


def turns(model_dir: Path, extra: list[str], log: Path, chars: int, count: int, keys: int) -> dict:
    s = _start(model_dir, extra, log, chars)
    uris = [f"file:///bench/turn_{count}_{i}.py" for i in range(count)]
    passes: dict[str, dict] = {}
    try:
        for uri, i in zip(uris, range(count)):
            s.set(uri, text_for(20 + i, chars))
        for name in ("cold", "warm"):
            waits, latency, reuse, model = [], [], [], 0
            for uri in uris:
                for k in range(keys):
                    s.type_key(uri, "xyz"[k % 3])
                    s.drain()
                    ms, _ = s.timed(uri)
                    line = s.line_for(uri)
                    latency.append(ms)
                    if line is not None and computed(line):
                        model += 1
                        waits.append(line.get("queue_ms", 0.0) + line.get("paused_ms", 0.0))
                        reuse.append(_reuse(line))
                    time.sleep(KEY_GAP_S)
            passes[name] = {"requests": len(latency), "model": model, "latency_p50_ms": _p50(latency),
                            "latency_max_ms": round(max(latency), 1) if latency else None,
                            "wait_p50_ms": _p50(waits), "wait_max_ms": round(max(waits), 1) if waits else None,
                            "reused_share": round(sum(r >= REUSED for r in reuse) / len(reuse), 3) if reuse else None,
                            "reuse_mean": round(statistics.fmean(reuse), 4) if reuse else None}
    finally:
        s.client.close()
    return {"documents": count, "keys": keys, **passes}


def run_section(args: argparse.Namespace) -> dict:
    from tabd.predictor.bench import shapes

    model_dir = Path(args.model or shapes.model_dir(args.shape))
    extra = ["--threads", str(args.threads)] if args.threads else []
    if args.weights:
        extra += ["--weights", args.weights]
    parts = {p.strip() for p in args.docs_parts.split(",") if p.strip()}
    counts = [int(n) for n in args.docs_count.split(",") if n.strip()]
    if not parts <= {"overlap", "cold", "turns"} or any(n < 1 for n in counts):
        raise RuntimeError("--docs-parts takes overlap, cold, turns; --docs-count positive numbers")
    chunk = chunk_for(parameters(model_dir))
    report: dict = {"shape": args.shape if not args.model else str(model_dir), "chars": args.docs_chars}
    with tempfile.TemporaryDirectory(prefix="tabd-documents-") as tmp:
        logs = Path(args.docs_log or tmp)
        logs.mkdir(parents=True, exist_ok=True)
        if "overlap" in parts:
            report["overlap"] = overlap(model_dir, extra, logs / "overlap.jsonl", args.docs_chars, chunk,
                                        args.docs_overlap_budget_ms)
        if "cold" in parts:
            report["cold"] = cold(model_dir, extra, logs / "cold.jsonl", args.docs_chars, args.docs_files)
        if "turns" in parts:
            report["turns"] = [turns(model_dir, extra, logs / f"turns_{n}.jsonl", args.docs_chars, n, args.docs_keys)
                               for n in counts]
    return report
