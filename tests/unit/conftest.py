"""The in-process tier's shared fixture: a tabd LSP server in this process with the fake backend."""
from __future__ import annotations

import pytest

from support.inprocess import InProcess


@pytest.fixture
async def srv():
    s = InProcess()
    yield s
    s.close()
