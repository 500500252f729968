"""tabd as a user installs it: the wheel built from the tracked files, installed (not editable) into a fresh
virtualenv, runs `tabd --version`, `tabd serve` (one inline completion through a real LSP client), `tabd complete` and
`tabd demo`. Every other test runs the editable install, which finds any module in the checkout; a package left out
of the wheel (tabd.daemon.edits once) is noticed only here.

The virtualenv gets its dependencies from .venv's site-packages (a .pth line naming that folder, added after the
wheel is installed), so the test needs no network and runs at the versions in constraints.txt; a plain path line
does not run .venv's own .pth files, so the editable install's import hook stays out, and the test checks that
every `tabd` module it runs comes from the wheel.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from lsprotocol import types

from support.fixture_model import MODEL_DIR, SUGGESTION
from support.lspclient import CAPS, inline, open_doc

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("daemon", "cache", "lsp", "predictor")  # tabd.daemon = daemon/, ... (setup.py)


def tracked_files() -> list[str]:
    """What a clean clone has: the files git tracks, as they are in the working tree (what is being committed)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the wheel is built from the files git tracks")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [p for p in out.split("\0") if p and os.path.lexists(ROOT / p)]  # a file deleted but not yet committed


def export(files: list[str], dest: Path) -> Path:
    for rel in files:
        src, dst = ROOT / rel, dest / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():  # .typecheck/tabd/* link to the folders
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    return dest


def run(cmd: list, cwd: Path, timeout: float = 300, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**environ, **env})
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


class Installed:
    """A fresh virtualenv holding the wheel, with .venv's dependencies visible."""

    def __init__(self, base: Path) -> None:
        self.files = tracked_files()
        src = export(self.files, base / "export")
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", base / "dist",
             src], cwd=base)
        (self.wheel,) = (base / "dist").glob("tabd-*.whl")
        self.venv = base / "venv"
        run([sys.executable, "-m", "venv", "--without-pip", self.venv], cwd=base)
        self.python = self.venv / "bin" / "python"
        run([sys.executable, "-m", "pip", "--python", self.python, "install", "-q", "--no-deps", "--no-index",
             self.wheel], cwd=base)
        self.site = Path(run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             cwd=base).stdout.strip())
        (self.site / "tabd-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        self.tabd = self.venv / "bin" / "tabd"
        self.work = base / "work"  # commands run outside the checkout
        self.work.mkdir()


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    return Installed(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_holds_every_tracked_file_of_the_packages(installed):
    """Modules, the embedded model, the samples, the native C sources, the telemetry assets and the training lists."""
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    wanted = [f for f in installed.files if f.split("/")[0] in FOLDERS]
    missing = [f for f in wanted if f"tabd/{f}" not in names]
    assert not missing, f"not in the wheel: {missing}"
    assert "tabd/predictor/model/model.safetensors" in names and "tabd/daemon/edits/__init__.py" in names


def test_every_module_imports_from_the_wheel_not_the_checkout(installed):
    probe = """
import importlib, json, pkgutil, sys
import tabd
names = [m.name for m in pkgutil.walk_packages(tabd.__path__, "tabd.") if m.ispkg]
files = {n: importlib.import_module(n).__file__ for n in names}
print(json.dumps({"files": files, "path": list(tabd.__path__),
                  "hooks": [m for m in sys.modules if m.startswith("__editable__")]}))
"""
    out = json.loads(run([installed.python, "-c", probe], cwd=installed.work).stdout)
    assert out["hooks"] == [], "the editable install's import hook is loaded"
    assert out["path"] == [str(installed.site / "tabd")]
    packages = {f"tabd.{f[:-len('/__init__.py')].replace('/', '.')}" for f in installed.files
                if f.split("/")[0] in FOLDERS and f.endswith("/__init__.py")}
    assert packages <= set(out["files"]), f"packages the wheel lacks: {sorted(packages - set(out['files']))}"
    outside = {n: f for n, f in out["files"].items() if not f.startswith(str(installed.site))}
    assert not outside, f"imported from outside the wheel: {outside}"


def test_the_dependencies_it_sees_are_the_constrained_versions(installed):
    """The wheel's requirements resolve, at the versions in constraints.txt (what .venv was installed with)."""
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "constraints.txt").read_text(), re.M))
    pins = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in pins.items()}
    probe = """
import json, re
from importlib import metadata
reqs = [r for r in metadata.requires("tabd") if "extra ==" not in r]
names = [re.match(r"[A-Za-z0-9_.-]+", r).group(0) for r in reqs]
print(json.dumps({n: metadata.version(n) for n in names}))
"""
    seen = json.loads(run([installed.python, "-c", probe], cwd=installed.work).stdout)
    # a local label (torch's +cpu) matches a pin without one, as pip's == does
    normal = {re.sub(r"[-_.]+", "-", k).lower(): v.split("+")[0] for k, v in seen.items()}
    differ = {n: (v, pins.get(n)) for n, v in normal.items() if n in pins and pins[n] != v}
    assert not differ, f"(seen, constraints.txt): {differ}"


def test_tabd_version(installed):
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert run([installed.tabd, "--version"], cwd=installed.work).stdout.strip() == f"tabd {version}"


@pytest.mark.asyncio(loop_scope="module")
async def test_tabd_serve_answers_an_inline_completion_over_stdio(installed, fixture_model):
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("wheel-test", "1")
    await client.start_io(str(installed.tabd), "serve", "--model", str(MODEL_DIR), "--min-confidence", "0",
                          cwd=str(installed.work), env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    try:
        await asyncio.wait_for(client.initialize_async(types.InitializeParams(capabilities=CAPS)), 120)
        client.initialized(types.InitializedParams())
        uri = (installed.work / "a.py").as_uri()
        text = "def main(argv):\n    return"
        open_doc(client, uri, text)
        result = await inline(client, uri, 1, len("    return"), timeout=120)
        assert [i.insert_text for i in result.items] == [SUGGESTION]
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()


def test_tabd_complete_runs_the_shipped_model(installed):
    src = installed.work / "c.py"
    src.write_text("import os\n\n\ndef main(argv):\n    for name in argv:\n        print(")
    out = run([installed.tabd, "complete", src, "--line", 5, "--character", 14, "--json"], cwd=installed.work)
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["source"] == "model"
    assert answer["model"].startswith(str(installed.site / "tabd" / "predictor" / "model")), answer


def test_tabd_demo_shows_a_suggestion_and_the_next_from_memory(installed):
    out = run([installed.tabd, "demo", "--no-replay"], cwd=installed.work).stdout
    assert "after Tab the next suggestion came from memory" in out, out[-3000:]


def test_tabd_doctor_sees_an_installed_tabd_whose_daemon_answers(installed):
    out = run([installed.tabd, "doctor", "--only", "install,daemon", "--json"], cwd=installed.work).stdout
    checks = {c["name"]: c for c in json.loads(out.strip().splitlines()[-1])["checks"]}
    assert checks["install"]["ok"] and checks["install"]["figures"]["editable"] is False, out
    assert str(installed.site) in checks["install"]["detail"]
    assert checks["daemon"]["ok"], out
