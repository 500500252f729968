"""`tabd doctor` as a user runs it: each check says what it saw, a failing one prints its fix, and `--json` gives
one object on the last line. The daemon check talks to a real `tabd serve` child; the remote check to a port where
nothing listens and to a real `tabd serve-model`; the editors check to the real Neovim and code-server where this
machine has them; the exclusion check to real files in a real git repository."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.engines import ServeModel
from support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
CODE_SERVER = REPO / ".cache" / "code-server" / "node_modules" / "code-server" / "out" / "node" / "entry.js"
VSIX = REPO / "editors" / "vscode" / "tabd.vsix"


def doctor(*args: str, cwd: Path | None = None, env: dict | None = None) -> tuple[int, str, dict]:
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "doctor", *args, "--json"], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=env)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    return proc.returncode, proc.stdout, json.loads(lines[-1])


def by_name(result: dict) -> dict:
    return {c["name"]: c for c in result["checks"]}


def test_a_working_set_up_passes_with_its_figures(fixture_model, tmp_path):
    src = tmp_path / "app.py"
    src.write_text("x = 1\n")
    code, out, result = doctor("--model", fixture_model, "--only", "install,daemon,model,exclusion",
                               "--path", str(src), cwd=tmp_path)
    checks = by_name(result)
    assert code == 0 and result["ok"], out
    assert checks["daemon"]["ok"] and checks["daemon"]["figures"]["first_ms"] >= 0
    assert checks["model"]["ok"] and checks["model"]["figures"]["model"].startswith(fixture_model)
    assert checks["exclusion"]["ok"] and not checks["exclusion"]["figures"]["excluded"]
    assert "ok   daemon" in out and "FAIL" not in out


def test_a_remote_engine_where_nothing_listens_fails_with_the_fix(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    code, out, result = doctor("--url", url, "--only", "remote", cwd=tmp_path)
    remote = by_name(result)["remote"]
    assert code == 1 and not result["ok"]
    assert remote["ok"] is False and "cannot reach" in remote["detail"]
    assert remote["fix"].startswith(f"nothing answers at {url}: start the engine")
    assert f"fix: nothing answers at {url}" in out  # printed for the user, not only in the JSON


def test_a_remote_engine_that_answers_names_its_fim_template(tmp_path):
    engine = ServeModel(free_port()).start()
    try:
        code, out, result = doctor("--url", engine.url, "--only", "remote", cwd=tmp_path)
    finally:
        engine.stop()
    remote = by_name(result)["remote"]
    assert code == 0 and remote["ok"], out
    assert remote["figures"]["fim"] == "tabd-spm"  # what tabd serve-model advertises for the embedded model


def test_a_model_that_does_not_load_fails_with_the_fix(tmp_path):
    code, out, result = doctor("--model", str(tmp_path / "no-such-model"), "--only", "daemon,model", cwd=tmp_path)
    checks = by_name(result)
    assert code == 1
    assert checks["daemon"]["ok"]  # the daemon starts and answers (empty): the model is what fails
    assert checks["model"]["ok"] is False and "no-such-model" in checks["model"]["detail"]
    assert "--model DIR must name a folder with config.json" in checks["model"]["fix"]


@pytest.fixture
def repo(tmp_path) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("*.log\nbuild/\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gen.py").write_text("x = 1\n")
    (tmp_path / ".env.local").write_text("KEY=1\n")
    (tmp_path / "main.py").write_text("print(1)\n")
    return tmp_path


def test_a_path_git_ignores_names_the_rule_and_the_fix(repo):
    code, out, result = doctor("--only", "exclusion", "--path", "build/gen.py", cwd=repo)
    check = by_name(result)["exclusion"]
    assert code == 1 and check["ok"] is False
    assert check["figures"]["git_rule"] == ".gitignore:2: build/"
    assert "git ignores it (.gitignore:2: build/)" in check["detail"]
    assert "remove or narrow the rule `build/` at .gitignore:2" in check["fix"]
    assert "fix: let it back in with an include glob: --include 'build/**'" in out
    code, _, result = doctor("--only", "exclusion", "--path", "build/gen.py", "--include", "build/**", cwd=repo)
    assert code == 0 and by_name(result)["exclusion"]["figures"]["excluded"] is False  # the fix it gave works


def test_a_path_on_the_deny_list_names_the_glob(repo):
    code, _, result = doctor("--only", "exclusion", "--path", ".env.local", cwd=repo)
    check = by_name(result)["exclusion"]
    assert code == 1 and check["ok"] is False and "`.env*`, on the default deny list" in check["detail"]
    assert check["fix"] == "if it holds no secrets, rename it so that `.env*` does not match"
    code, _, result = doctor("--only", "exclusion", "--path", ".env.local", "--include", ".env*", cwd=repo)
    assert code == 1, "an include glob let a file on the deny list back in"


def test_a_path_excluded_by_the_users_glob_says_which_to_remove(repo):
    code, _, result = doctor("--only", "exclusion", "--path", "main.py", "--exclude", "main.*", cwd=repo)
    check = by_name(result)["exclusion"]
    assert code == 1 and "your glob `main.*`" in check["detail"]
    assert check["fix"].startswith("remove `main.*` from --exclude / the `exclude` initialization option")


def test_a_path_that_is_not_excluded_passes(repo):
    code, _, result = doctor("--only", "exclusion", "--path", "main.py", cwd=repo)
    assert code == 0 and by_name(result)["exclusion"]["figures"]["excluded"] is False


def test_neovim_is_reported_with_its_version(tmp_path):
    nvim = shutil.which("nvim")
    if nvim is None:
        pytest.skip("no nvim on PATH (.ci/setup.d/30-neovim.sh installs it)")
    first = subprocess.run([nvim, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    _, _, result = doctor("--only", "editors", cwd=tmp_path)
    clients = by_name(result)["editors"]["figures"]["clients"]
    assert {"editor": "nvim", "path": nvim, "version": first.split()[-1].lstrip("v")} in clients


@pytest.mark.slow
def test_code_server_without_then_with_the_extension(tmp_path):
    """code-server on PATH as a user has it: the check fails with the install command until the vsix is in."""
    if not CODE_SERVER.exists() or not VSIX.exists() or shutil.which("node") is None:
        pytest.skip("code-server or tabd.vsix is not here (.ci/setup.d/40-vscode.sh)")
    bin_dir, extensions = tmp_path / "bin", tmp_path / "extensions"
    bin_dir.mkdir()
    wrapper = bin_dir / "code-server"
    wrapper.write_text(f'#!/bin/sh\nexec node {CODE_SERVER} --extensions-dir {extensions} "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data")}
    code, out, result = doctor("--only", "editors", cwd=tmp_path, env=env)
    check = by_name(result)["editors"]
    assert code == 1 and "tabd extension not installed" in check["detail"], out
    assert "code-server --install-extension tabd.vsix" in check["fix"]
    subprocess.run([str(wrapper), "--install-extension", str(VSIX)], env=env, check=True, capture_output=True,
                   timeout=120)
    version = json.loads((REPO / "editors" / "vscode" / "package.json").read_text())["version"]
    code, out, result = doctor("--only", "editors", cwd=tmp_path, env=env)
    assert code == 0 and f"(tabd extension {version})" in by_name(result)["editors"]["detail"], out
