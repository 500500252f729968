"""Command-line flags shared by serve, complete, replay and bench, and the Config they make."""
from __future__ import annotations

import argparse
import ipaddress

from tabd.daemon.runtime.config import Config


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("model and backend")
    g.add_argument("--model", metavar="DIR", help="local Hugging Face model directory (default: the embedded model)")
    g.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="where the model runs")
    g.add_argument("--backend", default="local", choices=["local", "openai", "copy"],
                   help="local engine, an OpenAI-compatible server, or copy (no model: the copy-from-the-file baseline)")
    g.add_argument("--url", help="server URL for --backend openai, e.g. http://127.0.0.1:8080")
    g.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key for --backend openai")
    g.add_argument("--remote-model", metavar="NAME", help="model name to send to the remote server")
    g.add_argument("--parallel", type=int, default=1, help="model requests at once (for a remote engine that batches; 1-32, default 1)")
    g.add_argument("--remote-timeout", type=float, default=20.0, metavar="SECONDS",
                   help="--backend openai: how long one request may take before it answers empty (default 20)")
    g.add_argument("--fim", metavar="FAMILY[:LAYOUT]", help="override the FIM template (tabd, qwen2.5-coder, starcoder2, deepseek-coder, codellama, plain)")
    g.add_argument("--depth", type=int, default=4,
                   help="the deepest speculation goes, in accepts ahead (default 4); how deep it goes follows how often "
                        "you accept (see --fixed-depth)")
    g.add_argument("--fixed-depth", action="store_true",
                   help="prefetch exactly --depth accepts ahead whatever you accept (for benchmarks)")
    g.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    g.add_argument("--engine", default="auto", choices=["auto", "native", "fast", "torch", "hf"],
                   help="auto (default): native where it can run the model, else fast; native: the whole forward in "
                        "native code, without torch (a Llama-shaped model on the CPU, a C compiler); fast: hand-written "
                        "forward, one-token steps in native code (built with the system C compiler; torch where there is "
                        "none); torch: the hand-written forward in torch only; hf: transformers' forward")
    g.add_argument("--weights", default="auto", choices=["auto", "fp32", "bf16", "int8"],
                   help="how the fast engine holds the weights on the CPU: fp32, bf16 (fp32 sums), int8 (a scale per "
                        "output column); auto: fp32 up to 512 MB of fp32 weights, else bf16 (tabd/stats says which)")
    g.add_argument("--max-new-tokens", type=int, default=48)
    g.add_argument("--lookup-min-p", type=float, default=None, metavar="P",
                   help="copy candidates (what followed the last occurrence of the text before the cursor) replace the "
                        "model's guess as far as the model's joint probability of the copied text stays >= P "
                        "(0: off; default 0.001)")
    g.add_argument("--min-confidence", type=float, default=None, metavar="P",
                   help="confidence gating: show the longest part of a suggestion the model gives a probability of at "
                        "least P as a whole (the product of its tokens'; 0..1; 0 shows everything; default: the "
                        "calibrated value). Alt+\\ / an invoked request shows the best guess anyway")
    g.add_argument("--no-known-names", action="store_true",
                   help="gate a suggestion that finishes the word at the cursor into a name the window or the open "
                        "files already spell like any other (by default it is shown at least to the end of the name)")
    g.add_argument("--min-chars", type=int, default=None, metavar="N",
                   help="show a suggestion only if it has at least N characters (default 2: a one-character "
                        "suggestion saves no keystroke, Tab is one too); an invoked request shows any")
    g.add_argument("--debounce-ms", type=int, default=None, metavar="MS",
                   help="a request the cache cannot answer waits at least MS before the model runs, longer when you "
                        "type steadily or the model is slow (at most 1000); a newer keystroke cancels it "
                        "(0: off; default 20)")
    g.add_argument("--no-speculation", action="store_true", help="do not prefetch the state after accept")
    g.add_argument("--no-cache", action="store_true", help="no completion cache, type-through or in-flight reuse")
    g.add_argument("--no-kv-reuse", action="store_true", help="recompute the whole prompt on every request")
    g.add_argument("--trust-remote-code", action="store_true", help="allow a model directory's own Python code")
    c = parser.add_argument_group("workspace context")
    c.add_argument("--context-tokens", type=int, default=320,
                   help="tokens of context from other open files, recent edits, imports and enclosing headers put "
                        "before the prompt (default 320; 0: none)")
    c.add_argument("--no-context", action="store_true", help="no workspace context (same as --context-tokens 0)")
    c.add_argument("--context-chunks", type=int, default=64, help="chunks the context store holds, all files together (default 64)")
    c.add_argument("--context-bytes", type=int, default=512 << 10, help="bytes of chunk text the store holds (default 524288)")
    c.add_argument("--context-lines", type=int, default=32, help="lines per chunk of an open file (default 32)")
    c.add_argument("--context-idle-ms", type=int, default=1000,
                   help="pause (no edit, no request) after which the context may change (default 1000)")
    c.add_argument("--no-warmup", action="store_true", help="no background prefill on open, focus or context change")


def config_from_args(args: argparse.Namespace) -> Config:
    config = Config(
        model=args.model,
        device=args.device,
        fim=args.fim,
        depth=args.depth,
        adaptive_depth=not getattr(args, "fixed_depth", False),
        threads=args.threads,
        max_new_tokens=args.max_new_tokens,
        **({} if getattr(args, "min_confidence", None) is None else {"min_confidence": args.min_confidence}),
        **({} if getattr(args, "min_chars", None) is None else {"min_chars": args.min_chars}),
        **({} if getattr(args, "lookup_min_p", None) is None else {"lookup_min_p": args.lookup_min_p}),
        **({} if getattr(args, "debounce_ms", None) is None else {"debounce_ms": args.debounce_ms}),
        known_names=not getattr(args, "no_known_names", False),
        speculation=not args.no_speculation,
        cache=not args.no_cache,
        kv_reuse=not args.no_kv_reuse,
        trust_remote_code=args.trust_remote_code,
        log=getattr(args, "log", None),
        log_text=getattr(args, "log_text", False),
        record=getattr(args, "record", None),
        backend=args.backend,
        context_tokens=0 if getattr(args, "no_context", False) else getattr(args, "context_tokens", 320),
        context_chunks=getattr(args, "context_chunks", 64),
        context_bytes=getattr(args, "context_bytes", 512 << 10),
        context_lines=getattr(args, "context_lines", 32),
        context_idle_ms=getattr(args, "context_idle_ms", 1000),
        warmup=not getattr(args, "no_warmup", False),
        engine=getattr(args, "engine", "auto") or "auto",
        url=args.url,
        api_key_env=args.api_key_env,
        remote_model=args.remote_model,
        parallel=getattr(args, "parallel", 1),
        timeout=getattr(args, "remote_timeout", 20.0),  # not --timeout: replay has its own (one answer's wait)
        weights=getattr(args, "weights", "auto") or "auto",
    )
    return config.validate()


def parse_host_port(value: str, allow_remote: bool, what: str) -> tuple[str, int]:
    """HOST:PORT for a listener; a non-loopback host needs --allow-remote."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{what}: expected HOST:PORT, got {value!r}")
    host = host.strip("[]") or "127.0.0.1"
    if not allow_remote and not is_loopback(host):
        raise ValueError(f"{what}: {host} is not a loopback address; tabd listens on 127.0.0.1 unless you pass --allow-remote")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
