"""What every tier shares: the fixture model, and each test marked with its tier (the folder it lives in).
The helpers the tests import are in tests/support."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def fixture_model():
    """The directory of a small model whose suggestions are known (see fixture_model.py), built once per session."""
    import shutil

    from support.fixture_model import MODEL_DIR, build

    build(MODEL_DIR)
    yield str(MODEL_DIR)
    shutil.rmtree(MODEL_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def pairs_model(tmp_path_factory):
    """The fixture model that also closes an open `(` with `x)` (support.fixture_model.PAIR_SUGGESTION)."""
    from support.fixture_model import build

    return str(build(tmp_path_factory.mktemp("pairs-model"), pairs=True))


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
