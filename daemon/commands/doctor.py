"""`tabd doctor`: what this set-up lacks, and the fix for each gap.

Each check is one plain function that returns a Check (its name, passed / failed / not applicable, what it saw, the
fix). The daemon is checked the way an editor meets it: a `tabd serve` child over stdio, initialize, one inline
completion; the model by how long it takes to load; a remote engine (--url) by one request, with the FIM template it
is spoken to in; the editors by their own command lines; a path (--path FILE) against content exclusion, naming the
rule that keeps it from the model. `--json` prints one object on the last line.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tabd.daemon.runtime.options import add_model_arguments, config_from_args, flags_of

CHECKS = ("install", "daemon", "model", "remote", "editors", "exclusion")
VSCODE_EXTENSION = "tabd.tabd"  # editors/vscode/package.json: publisher.name
VSCODE_COMMANDS = ("code", "code-server", "codium")
SERVE_TIMEOUT_S = 180.0  # start, load and the first answer of a local model on a slow machine
PROBE = "def total(values):\n    result = 0\n    for value in values:\n        result += value\n    return "


@dataclass
class Check:
    name: str
    ok: bool | None  # None: not applicable here (nothing to check), neither passed nor failed
    detail: str
    fix: str = ""
    figures: dict | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--path", metavar="FILE", help="check whether content exclusion keeps FILE from the model, "
                                                       "and by which rule")
    parser.add_argument("--root", metavar="DIR", help="the workspace folder FILE is in, as the editor opens it "
                                                      "(default: the git work tree above FILE, else its folder)")
    parser.add_argument("--only", metavar="CHECK", action="append",
                        help=f"run only this check (repeat for more): {', '.join(CHECKS)}")
    parser.add_argument("--timeout", type=float, default=SERVE_TIMEOUT_S, metavar="S",
                        help=f"how long the daemon may take to start and answer (default {SERVE_TIMEOUT_S:g})")
    parser.add_argument("--json", action="store_true", help="print the checks as one JSON object on the last line")
    add_model_arguments(parser)


# -- install ----------------------------------------------------------------------------------------------------


def check_install() -> Check:
    from importlib import metadata

    import tabd.daemon

    where = Path(tabd.daemon.__file__).resolve().parent.parent
    try:
        dist = metadata.distribution("tabd")
        version = dist.version
        direct = json.loads(dist.read_text("direct_url.json") or "{}")  # pip writes it for a local install
        editable = bool((direct.get("dir_info") or {}).get("editable"))
    except metadata.PackageNotFoundError:
        return Check("install", False, f"tabd runs from {where} but is not installed",
                     "install it: `pipx install /path/to/tabd` (or `pip install /path/to/tabd`)")
    how = "editable (a development checkout)" if editable else "installed"
    return Check("install", True, f"tabd {version}, {how}, at {where}, Python {sys.version.split()[0]}",
                 figures={"version": version, "editable": editable, "python": sys.version.split()[0]})


# -- the daemon and its model --------------------------------------------------------------------------------


def serve_command(args: argparse.Namespace) -> list[str]:
    """`tabd serve` with the model flags this doctor was given, run by this Python (the tabd it belongs to)."""
    return [sys.executable, "-m", "tabd.daemon", "serve", *flags_of(args)]


async def _talk_to_daemon(cmd: list[str], timeout: float) -> dict:
    """Start `tabd serve`, initialize, wait for the model, ask for one inline completion: what happened, timed."""
    from tabd.lsp.client import Client, suggestions

    client = Client("tabd-doctor")
    out: dict = {"started": False}
    t0 = time.monotonic()
    await client.start(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    process = client.process
    try:
        await asyncio.wait_for(client.initialize(), timeout)
        out.update(started=True, initialize_ms=round((time.monotonic() - t0) * 1000))
        stats = await client.call("tabd/stats", {})
        t_load = time.monotonic()
        while stats.get("model") == "loading" and time.monotonic() - t0 < timeout:
            await asyncio.sleep(0.1)
            stats = await client.call("tabd/stats", {})
        out.update(model=stats.get("model"), engine=stats.get("engine"),
                   load_s=round(time.monotonic() - t_load, 2), ready_s=round(time.monotonic() - t0, 2))
        # a file in no workspace and no git repository: content exclusion has no say over the probe
        uri = Path(tempfile.gettempdir(), "tabd-doctor", "probe.py").as_uri()
        client.open(uri, "python", 1, PROBE)
        lines = PROBE.split("\n")
        t1 = time.monotonic()
        result = await asyncio.wait_for(asyncio.wrap_future(client.inline_completion(
            uri, {"line": len(lines) - 1, "character": len(lines[-1])}, invoked=True)), timeout)
        out.update(answered=True, first_ms=round((time.monotonic() - t1) * 1000),
                   suggestion=[s.text for s in suggestions(result)][:1])
        out["reason"] = ((await client.call("tabd/stats", {})).get("last") or {}).get("reason")
        out["messages"] = [m.get("params", {}).get("message", "") for m in client.notifications
                           if m.get("method") == "window/showMessage"]
    except Exception as exc:  # it died, hung or refused: the stderr below says why
        out["error"] = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    finally:
        out["stderr"] = await _stop(client, process)
    return out


async def _stop(client, process) -> str:
    """Shut the child down (kill it if it does not go) and return the end of what it wrote to stderr."""
    if process is None:
        return ""
    if process.returncode is None:
        try:
            await asyncio.wait_for(client.call("shutdown", None), 5)
            client.notify("exit", None)
            await asyncio.wait_for(process.wait(), 5)
        except Exception:
            process.kill()
            await process.wait()
    err = b""
    if process.stderr is not None:
        try:
            err = await asyncio.wait_for(process.stderr.read(), 5)
        except Exception:
            pass
    return err.decode("utf-8", "replace")[-2000:]


def last_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"\w*(Error|Exception)\b", line)]
    return (errors or lines or [""])[-1][:300]


def daemon_fix(stderr: str) -> str:
    missing = re.search(r"ModuleNotFoundError: No module named '([^']+)'", stderr)
    if missing and missing.group(1).startswith("tabd"):
        return (f"this install of tabd lacks {missing.group(1)} (a wheel built without it): reinstall from a current "
                "checkout, `pipx install --force /path/to/tabd` or `pip install --force-reinstall /path/to/tabd`")
    if missing:
        return (f"a dependency is missing ({missing.group(1)}): reinstall tabd with its dependencies "
                "(`pipx install --force /path/to/tabd`)")
    return "run `tabd serve` in a terminal to see its whole message; `tabd serve --help` lists the flags"


def check_daemon(talk: dict, cmd: list[str]) -> Check:
    shown_cmd = " ".join(["tabd serve", *cmd[4:]])
    if not talk.get("started"):
        return Check("daemon", False, f"`{shown_cmd}` did not answer initialize: "
                                      f"{last_error_line(talk.get('stderr', '')) or talk.get('error', '')}",
                     daemon_fix(talk.get("stderr", "")))
    if not talk.get("answered"):
        return Check("daemon", False, f"`{shown_cmd}` started but did not answer an inline completion: "
                                      f"{talk.get('error', '')} {last_error_line(talk.get('stderr', ''))}".strip(),
                     daemon_fix(talk.get("stderr", "")))
    said = f"`{talk['suggestion'][0]}`" if talk.get("suggestion") else f"no suggestion ({talk.get('reason')})"
    return Check("daemon", True, f"`{shown_cmd}` answered initialize in {talk['initialize_ms']} ms and an inline "
                                 f"completion in {talk['first_ms']} ms over stdio: {said}",
                 figures={k: talk[k] for k in ("initialize_ms", "first_ms")})


def check_model(talk: dict, args: argparse.Namespace) -> Check:
    if args.backend == "openai":
        return Check("model", None, "the remote engine holds the model (see remote)")
    if not talk.get("started"):
        return Check("model", None, "not checked: the daemon did not start (see daemon)")
    if talk.get("model") in ("unavailable", "loading", None):
        messages = [m for m in talk.get("messages", []) if m]
        why = messages[-1] if messages else last_error_line(talk.get("stderr", ""))
        return Check("model", False, f"the model did not load: {why}",
                     "--model DIR must name a folder with config.json, the weights (*.safetensors) and the tokenizer; "
                     "leave it out for the embedded model, or use a served one with --backend openai --url URL")
    detail = f"model {talk['model']} ({talk.get('engine')} engine) ready {talk['ready_s']} s after the start " \
             f"({talk['load_s']} s after initialize); first suggestion in {talk['first_ms']} ms"
    figures = {k: talk[k] for k in ("model", "engine", "ready_s", "load_s", "first_ms")}
    if not args.model:
        return Check("model", True, detail + " (the embedded model: a small offline fallback)",
                     "for daily use serve a real code model: --model DIR, or --backend openai --url URL "
                     "(llama-server, Ollama, vLLM)", figures)
    return Check("model", True, detail, figures=figures)


# -- a remote engine ------------------------------------------------------------------------------------------


def check_remote(args: argparse.Namespace) -> Check:
    if not getattr(args, "url", None) and getattr(args, "backend", None) != "openai":
        return Check("remote", None, "no remote engine set (--url): the local model answers")
    from tabd.daemon.runtime.backends import make_backend
    from tabd.predictor.types import GenSettings, Query

    url = getattr(args, "url", None) or "?"
    try:
        config = config_from_args(args)
        backend = make_backend(config)
        t0 = time.monotonic()
        prediction = backend.predict(Query(PROBE, "\n", GenSettings(max_new_tokens=8)))
        ms = round((time.monotonic() - t0) * 1000)
    except Exception as exc:
        return Check("remote", False, str(exc) if url in str(exc) else f"{url}: {exc}", remote_fix(str(exc), url))
    model_id = str(getattr(backend, "model_id", ""))
    template = model_id.rpartition("|")[2] or "?"
    model = model_id[len("remote:"):].rpartition("|")[0] if model_id.startswith("remote:") else model_id
    return Check("remote", True, f"{model} answered in {ms} ms; FIM template {template}",
                 figures={"url": url, "model": model, "fim": template, "ms": ms, "text": prediction.text})


def remote_fix(message: str, url: str) -> str:
    if "(--url)" in message or "--allow-insecure-url" in message:
        return ("give --url as the engine's base URL, http://127.0.0.1:PORT on this machine (https for another "
                "host, or --allow-insecure-url on a network you trust)")
    if "cannot reach" in message or "refused" in message.lower() or "connect" in message.lower():
        return (f"nothing answers at {url}: start the engine (`llama-server -m MODEL.gguf --port 8080`, "
                "`ollama serve`, `vllm serve MODEL`, or `tabd serve-model`) or correct --url")
    if "FIM template" in message or "fim" in message.lower():
        return "set the FIM template for the model the engine serves: --fim FAMILY[:LAYOUT], or --fim server"
    if "not served there" in message:
        return "name a model the engine serves (--remote-model), or leave it out to take the engine's first"
    return "run `tabd complete FILE --line L --character C --backend openai --url URL` to see the request fail"


# -- editors ---------------------------------------------------------------------------------------------------


def version_line(cmd: list[str]) -> str | None:
    """The first line of `cmd --version` that holds a version (code-server may say where it wrote its config
    first); None when it does not run."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    lines = [line.strip() for line in (done.stdout + "\n" + done.stderr).splitlines()]
    return next((line for line in lines if re.match(r"(NVIM )?v?\d+\.\d+", line)), None)


def vscode_clients() -> list[dict]:
    """Each VS Code-like command on PATH: its version and tabd's extension version there ("" when not installed)."""
    found = []
    for name in VSCODE_COMMANDS:
        exe = shutil.which(name)
        if not exe:
            continue
        line = version_line([exe, "--version"])
        version = line.split()[0] if line else "?"
        listed = _output([exe, "--list-extensions", "--show-versions"]) if line else ""
        ext = next((line.split("@", 1)[1] for line in listed.splitlines()
                    if line.lower().startswith(VSCODE_EXTENSION + "@")), "")
        found.append({"editor": name, "path": exe, "version": version, "extension": ext})
    return found


def _output(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def neovim_client() -> dict | None:
    exe = shutil.which("nvim")
    if not exe:
        return None
    line = version_line([exe, "--version"]) or "?"
    version = line.split()[-1].lstrip("v")
    return {"editor": "nvim", "path": exe, "version": version}


def check_editors() -> Check:
    clients = vscode_clients()
    nvim = neovim_client()
    if nvim:
        clients.append(nvim)
    if not clients:
        return Check("editors", False, "no editor found on PATH (nvim, code, code-server, codium)",
                     "install tabd's client in your editor: VS Code, `code --install-extension tabd.vsix` "
                     "(make vsix builds it); Neovim, the plugin in editors/nvim (the README's Neovim part)")
    parts, fixes = [], []
    for c in clients:
        if c["editor"] == "nvim":
            parts.append(f"nvim {c['version']}")
            if _older(c["version"], (0, 7)):
                fixes.append(f"Neovim {c['version']} is older than tabd's plugin supports (0.7): upgrade it")
        else:
            parts.append(f"{c['editor']} {c['version']} (tabd extension {c['extension'] or 'not installed'})")
            if not c["extension"]:
                fixes.append(f"install the extension: `{c['editor']} --install-extension tabd.vsix` "
                             "(make vsix builds it)")
    return Check("editors", not fixes, "; ".join(parts), "; ".join(fixes), figures={"clients": clients})


def _older(version: str, than: tuple[int, int]) -> bool:
    m = re.match(r"(\d+)\.(\d+)", version)
    return bool(m) and (int(m.group(1)), int(m.group(2))) < than


# -- content exclusion ---------------------------------------------------------------------------------------


def git_rule(path: str) -> str:
    """The ignore rule git applies to `path`, as `source:line: pattern` (`git check-ignore -v`); "" if none."""
    from tabd.daemon.runtime.exclusion import git_work_tree

    top = git_work_tree(path)
    if top is None:
        return ""
    try:
        done = subprocess.run(["git", "-C", top, "check-ignore", "-v", "--", path], capture_output=True, text=True,
                              timeout=5, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return ""
    source, _, _ = done.stdout.strip().partition("\t")
    where, _, pattern = source.rpartition(":")
    if not where:
        return ""
    file, _, line = where.rpartition(":")
    return f"{os.path.relpath(os.path.join(top, file), top) if not os.path.isabs(file) else file}:{line}: {pattern}"


def default_root(path: str) -> str:
    from tabd.daemon.runtime.exclusion import git_work_tree

    return git_work_tree(path) or os.path.dirname(path)


def check_exclusion(args: argparse.Namespace) -> Check:
    if not args.path:
        return Check("exclusion", None, "no file given (--path FILE says whether and why a file gets no suggestions)")
    from tabd.daemon.runtime.exclusion import Exclusion, relative_path

    path = os.path.abspath(args.path)
    root = os.path.abspath(args.root) if args.root else default_root(path)
    config = config_from_args(args)
    # the Exclusion `tabd serve` builds from these settings (lsp/server.py), asked as it asks an opened document
    exclusion = Exclusion(config.exclude, include=config.include)
    rule = exclusion.rule(path, [root])
    shown, relative = os.path.relpath(path), relative_path(path, [root])
    figures = {"path": path, "root": root, "excluded": rule is not None, "rule": str(rule) if rule else ""}
    if rule is None:
        problems = f" ({'; '.join(exclusion.problems)})" if exclusion.problems else ""
        return Check("exclusion", True, f"{shown} is not excluded: its text may reach the model{problems}",
                     figures=figures)
    if rule.kind == "git":
        line = git_rule(path)
        figures["git_rule"] = line
        where, _, pattern = line.rpartition(": ")
        fixes = [include_fix(relative), f"remove or narrow the rule `{pattern}` at {where}" if line else ""]
        return Check("exclusion", False, f"{shown} is excluded: git ignores it ({line or 'a rule git applies'}), and "
                                         "tabd keeps what git ignores from the model",
                     "; or ".join(f for f in fixes if f), figures)
    if rule.kind == "default":
        return Check("exclusion", False, f"{shown} is excluded by `{rule.glob}`, on the default deny list (names of "
                                         "files people keep secrets in; no setting lets such a file back in)",
                     f"if it holds no secrets, rename it so that `{rule.glob}` does not match", figures)
    if rule.kind == "exclude":
        return Check("exclusion", False, f"{shown} is excluded by your glob `{rule.glob}` (--exclude / the client's "
                                         "`exclude` option)",
                     f"remove `{rule.glob}` from --exclude / the `exclude` initialization option; or "
                     + include_fix(relative), figures)
    return Check("exclusion", False, f"{shown} is excluded: {rule}", "", figures)


def include_fix(relative: str) -> str:
    """The `include` glob that lets a file (and the folder it is in) back in past an exclude glob or git."""
    folder = relative.rpartition("/")[0]
    glob = f"{folder}/**" if folder else relative
    return f"let it back in with an include glob: --include '{glob}' (the client's `include` option)"


# -- the command -----------------------------------------------------------------------------------------------


def run_checks(args: argparse.Namespace) -> list[Check]:
    wanted = [c for part in (args.only or CHECKS) for c in part.split(",") if c]
    unknown = sorted(set(wanted) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown check {', '.join(unknown)} (checks: {', '.join(CHECKS)})")
    checks: list[Check] = []
    if "install" in wanted:
        checks.append(check_install())
    if "daemon" in wanted or "model" in wanted:
        cmd = serve_command(args)
        talk = asyncio.run(_talk_to_daemon(cmd, args.timeout))
        if "daemon" in wanted:
            checks.append(check_daemon(talk, cmd))
        if "model" in wanted:
            checks.append(check_model(talk, args))
    if "remote" in wanted:
        checks.append(check_remote(args))
    if "editors" in wanted:
        checks.append(check_editors())
    if "exclusion" in wanted:
        checks.append(check_exclusion(args))
    return checks


def report(checks: list[Check]) -> str:
    marks = {True: "ok  ", False: "FAIL", None: "--  "}
    lines = []
    for c in checks:
        lines.append(f"{marks[c.ok]} {c.name:<9} {c.detail}")
        if c.fix:
            lines.append(f"{'':14} fix: {c.fix}" if c.ok is False else f"{'':14} tip: {c.fix}")
    failed = [c.name for c in checks if c.ok is False]
    lines.append(f"{len(failed)} of {len(checks)} checks failed: {', '.join(failed)}" if failed
                 else f"all {len(checks)} checks passed (-- : nothing to check there)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.url and args.backend == "local":  # `tabd doctor --url URL` means: check that engine
        args.backend = "openai"
    try:
        config_from_args(args)  # a bad flag is one line, before anything starts
        checks = run_checks(args)
    except ValueError as exc:
        print(f"tabd doctor: {exc}", file=sys.stderr)
        return 2
    print(report(checks), flush=True)
    if args.json:
        print(json.dumps({"checks": [{k: v for k, v in asdict(c).items() if v is not None or k == "ok"}
                                     for c in checks],
                          "ok": not any(c.ok is False for c in checks)}))
    return 1 if any(c.ok is False for c in checks) else 0
