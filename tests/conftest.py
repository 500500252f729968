"""Shared test helpers: the command that starts a real `tabd serve` child process."""
from __future__ import annotations

import sys

import pytest


def serve_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "tabd.daemon", "serve", *extra]


@pytest.fixture
def tmp_log(tmp_path):
    return tmp_path / "tabd.jsonl"
