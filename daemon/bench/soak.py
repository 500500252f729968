"""`tabd bench soak --requests N`: does a long session leak? RSS and cache bytes over N requests.

A `tabd serve` child is driven over a real stdio connection: several documents,
each typed into and backed out of line by line (so most states come round
again and are answered from the cache, as in real editing), with a fresh line
now and then (new states: model calls and prefetches), an accept or a dismiss
for some suggestions, and a cancelled request now and then. The child's RSS
comes from /proc/<pid>/status, the cache's size from `tabd/stats`. RSS growth is
measured from the end of warm-up (the first 10% of requests, at least one pass
over every document) to the end.
"""
from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import threading
import time

from tabd.lsp.framing import frame, read_message

WORDS = ["total", "count", "value", "items", "result", "index", "name", "path", "data", "size", "line", "key"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("soak section")
    g.add_argument("--requests", type=int, default=20000, help="inline completion requests to send (default 20000)")
    g.add_argument("--soak-docs", type=int, default=4, help="documents edited in turn (default 4)")
    g.add_argument("--soak-max-new-tokens", type=int, default=8,
                   help="the server's --max-new-tokens: small keeps the soak quick (default 8)")
    g.add_argument("--soak-fresh", type=float, default=0.03, help="share of edits that type a line never seen (default 0.03)")
    g.add_argument("--soak-seed", type=int, default=11)
    g.add_argument("--soak-server-cmd", default=None, help=argparse.SUPPRESS)  # tests: another server


class Client:
    """A minimal blocking LSP client over a child's stdio (Content-Length framing, responses by id)."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.replies: dict = {}
        self.cond = threading.Condition()
        self.eof = False
        self.ids = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            message = read_message(self.proc.stdout)
            if message is None:
                with self.cond:
                    self.eof = True
                    self.cond.notify_all()
                return
            if "id" in message and "method" not in message:
                with self.cond:
                    self.replies[message["id"]] = message
                    self.cond.notify_all()

    def send(self, obj: dict) -> None:
        self.proc.stdin.write(frame(obj))
        self.proc.stdin.flush()

    def notify(self, method: str, params) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params) -> int:
        self.ids += 1
        self.send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        return self.ids

    def reply(self, msg_id: int, timeout: float = 120.0) -> dict:
        deadline = time.monotonic() + timeout
        with self.cond:
            while msg_id not in self.replies:
                left = deadline - time.monotonic()
                if self.eof or left <= 0:
                    raise RuntimeError(f"the server gave no reply to request {msg_id} ({'exited' if self.eof else 'timeout'})")
                self.cond.wait(left)
            return self.replies.pop(msg_id)

    def call(self, method: str, params) -> dict:
        reply = self.reply(self.request(method, params))
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def close(self) -> int | None:
        try:
            self.call("shutdown", None)
            self.notify("exit", None)
            return self.proc.wait(30)
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(10)
            return None


class Doc:
    """One document typed into at its end: a line goes in key by key, then comes out again."""

    def __init__(self, uri: str, rng: random.Random) -> None:
        self.uri = uri
        self.rng = rng
        self.version = 1
        self.base = "import os\n\n\ndef work(data):\n    total = 0\n    for item in data:\n        "
        self.base_line, self.base_col = 6, 8
        self.lines = [f"{w} = {w} + item" for w in WORDS[:6]]
        self.current = self.rng.choice(self.lines)
        self.typed = 0
        self.deleting = False

    def next_edit(self, fresh: float) -> dict:
        """The next LSP content change; the cursor is then at (line, col)."""
        col = self.base_col + self.typed
        if not self.deleting and self.typed < len(self.current):
            ch = self.current[self.typed]
            self.typed += 1
            return self._change(col, col, ch)
        if not self.deleting:
            self.deleting = True
        self.typed -= 1
        if self.typed == 0:
            self.deleting = False
            if self.rng.random() < 2 * fresh:  # a fresh line: half its requests (the typing) are new states
                self.current = f"{self.rng.choice(WORDS)}_{self.rng.randrange(10**6)} = item"
            else:
                self.current = self.rng.choice(self.lines)
        return self._change(col - 1, col, "")

    def _change(self, a: int, b: int, text: str) -> dict:
        self.version += 1
        return {"range": {"start": {"line": self.base_line, "character": a}, "end": {"line": self.base_line, "character": b}},
                "text": text}

    @property
    def cursor(self) -> dict:
        return {"line": self.base_line, "character": self.base_col + self.typed}


def soak(cmd: list[str], requests: int, docs: int, fresh: float, seed: int, progress=None) -> dict:
    rng = random.Random(seed)
    client = Client(cmd)
    try:
        client.call("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": {
            "textDocument": {"inlineCompletion": {}, "synchronization": {}}}})
        client.notify("initialized", {})
        documents = [Doc(f"file:///soak/doc{i}.py", random.Random(seed + i)) for i in range(docs)]
        for d in documents:
            client.notify("textDocument/didOpen", {"textDocument": {"uri": d.uri, "languageId": "python", "version": 1, "text": d.base}})
        warmup = max(requests // 10, docs * 40)
        if warmup >= requests:  # a short run: measure its second half
            warmup = max(1, requests // 2)
        rss_start = rss_max = 0.0
        cache_max, bound, sources = 0, 0, {}
        t0 = time.monotonic()
        for n in range(1, requests + 1):
            d = documents[n % docs]
            change = d.next_edit(fresh)
            client.notify("textDocument/didChange", {"textDocument": {"uri": d.uri, "version": d.version}, "contentChanges": [change]})
            params = {"textDocument": {"uri": d.uri}, "position": d.cursor, "context": {"triggerKind": 2}}
            msg_id = client.request("textDocument/inlineCompletion", params)
            if rng.random() < 0.01:  # the editor moved on: cancel it (answered either way)
                client.notify("$/cancelRequest", {"id": msg_id})
            reply = client.reply(msg_id)
            items = (reply.get("result") or {}).get("items") or []
            if items and items[0].get("command"):
                verdict = rng.random()
                if verdict < 0.05:
                    client.call("workspace/executeCommand", {"command": "tabd.accept", "arguments": items[0]["command"]["arguments"]})
                elif verdict < 0.10:
                    client.call("workspace/executeCommand", {"command": "tabd.dismiss", "arguments": items[0]["command"]["arguments"]})
            if n % 250 == 0 or n == requests or n == warmup:
                stats = client.call("tabd/stats", {})
                cache_max = max(cache_max, stats["cache"]["bytes"])
                bound = stats["cache"]["bound_bytes"]
                sources = stats["sources"]
                rss = client.rss_mb()
                rss_max = max(rss_max, rss)
                if n == warmup:
                    rss_start = rss
                if progress is not None:
                    progress(n, rss, stats["cache"]["bytes"])
        rss_end = client.rss_mb()
        elapsed = time.monotonic() - t0
    finally:
        code = client.close()
    return {
        "requests": requests,
        "rss_start_mb": round(rss_start, 1),
        "rss_end_mb": round(rss_end, 1),
        "rss_growth_pct": round((rss_end - rss_start) / rss_start * 100, 2) if rss_start else 0.0,
        "rss_max_mb": round(rss_max, 1),
        "cache_bytes_max": cache_max,
        "cache_bytes_bound": bound,
        "warmup_requests": warmup,
        "seconds": round(elapsed, 1),
        "sources": sources,
        "exit_code": code,
    }


def run_section(args: argparse.Namespace) -> dict:
    requests = args.requests
    if requests < 1:
        raise RuntimeError("--requests must be at least 1")
    cmd = (args.soak_server_cmd.split() if args.soak_server_cmd
           else [sys.executable, "-m", "tabd.daemon", "serve", "--max-new-tokens", str(args.soak_max_new_tokens)])
    if args.model:
        cmd += ["--model", args.model]

    def progress(n, rss, cache_bytes):
        if not args.json:
            print(f"  soak: {n} requests, rss {rss:.1f} MB, cache {cache_bytes} B", file=sys.stderr)

    return soak(cmd, requests, args.soak_docs, args.soak_fresh, args.soak_seed, progress)
