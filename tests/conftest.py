"""Shared test helpers: the command that starts a real `tabd serve` child process."""
from __future__ import annotations

import sys

import pytest


def serve_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "tabd.daemon", "serve", *extra]


@pytest.fixture
def tmp_log(tmp_path):
    return tmp_path / "tabd.jsonl"


@pytest.fixture(scope="session")
def fixture_model():
    """The directory of a small model whose suggestions are known (see fixture_model.py), built once per session."""
    import shutil

    from support.fixture_model import MODEL_DIR, build

    build(MODEL_DIR)
    yield str(MODEL_DIR)
    shutil.rmtree(MODEL_DIR, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """Each test carries its tier's marker (the folder it lives in): `-m unit` runs the in-process tier alone."""
    for item in items:
        parts = item.path.parts
        for tier in ("unit", "server", "editors"):
            if tier in parts:
                item.add_marker(getattr(pytest.mark, tier))
                if tier == "editors":
                    item.add_marker(pytest.mark.editors)
                break
