"""`tabd bench edits`' sessions from release diffs, on local archives (no network): wheels and sdists read, files
paired, propagation sessions (one repeated rename) split from the rest, typed sessions that end where they should."""
from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

from tabd.daemon.sessions.diff_typist import final_text
from tabd.daemon.sessions.format import parse_session, dumps_event, header
from tabd.daemon.sessions.hunks import apply_hunks
from tabd.daemon.sessions.release_edits import file_sessions, pick, python_sources, release_sessions, session_events

OLD_CORE = '''def load(path, count):
    data = read(path)
    if count:
        return data[:count]
    return data


def save(path, data):
    write(path, data)
'''
NEW_CORE = '''def load(path, limit):
    data = read(path)
    if limit:
        return data[:limit]
    return data


def save(path, data, mode="w"):
    write(path, data, mode)
'''


def _wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def _sdist(path: Path, top: str, files: dict[str, str | bytes]) -> Path:
    with tarfile.open(path, "w:gz") as t:
        for name, text in files.items():
            data = text if isinstance(text, bytes) else text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def test_archives_give_their_python_files_by_package_path(tmp_path):
    files = {"pkg/core.py": OLD_CORE, "pkg/README.txt": "x", "pkg/latin.py": "x = 1\n"}
    whl = python_sources(_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", files))
    assert set(whl) == {"pkg/core.py", "pkg/latin.py"} and whl["pkg/core.py"] == OLD_CORE
    sdist = python_sources(_sdist(tmp_path / "pkg-1.0.tar.gz", "pkg-1.0", {**files, "pkg/bad.py": b"caf\xe9 = 1\n"}))
    assert set(sdist) == {"pkg/core.py", "pkg/latin.py"}  # the name-version folder dropped, non-UTF-8 left out
    assert sdist["pkg/core.py"] == OLD_CORE


def test_a_repeated_rename_is_a_propagation_session_and_the_rest_another():
    sessions = file_sessions("pkg", "pkg/core.py", OLD_CORE, NEW_CORE)
    groups = [s.group for s in sessions]
    assert groups == ["propagation", "rest"]
    prop, rest = sessions
    assert [h.key for h in prop.chosen] == [("count", "limit")] * 3
    assert all(h.old(OLD_CORE) == "count" and h.text == "limit" for h in prop.chosen)
    assert all(h.key != ("count", "limit") for h in rest.chosen) and len(rest.chosen) == 2
    # the two sessions together are the whole diff
    everything = sorted(prop.chosen + rest.chosen, key=lambda h: h.start)
    assert apply_hunks(OLD_CORE, everything) == NEW_CORE
    capped = file_sessions("pkg", "pkg/core.py", OLD_CORE, NEW_CORE, max_sites=2)
    assert len(capped[0].chosen) == 2


def test_release_pairs_files_by_path_and_picking_is_deterministic(tmp_path):
    old = {"pkg/core.py": OLD_CORE, "pkg/gone.py": "a = 1\n", "pkg/same.py": "b = 2\n"}
    new = {"pkg/core.py": NEW_CORE, "pkg/fresh.py": "c = 3\n", "pkg/same.py": "b = 2\n"}
    sessions = release_sessions("pkg", old, new)
    assert {s.path for s in sessions} == {"pkg/core.py"}
    other = release_sessions("lib", {"lib/m.py": OLD_CORE}, {"lib/m.py": NEW_CORE})
    both = sessions + other
    first = pick(both, "propagation", 2, seed=3)
    assert [s.dist for s in first] == ["lib", "pkg"]  # spread over the distributions
    assert first == pick(both, "propagation", 2, seed=3)
    assert len(pick(both, "rest", 5, seed=3)) == 2


def test_typed_sessions_end_in_the_old_file_with_their_hunks_made(tmp_path):
    sessions = file_sessions("pkg", "pkg/core.py", OLD_CORE, NEW_CORE)
    for editor in ("plain", "vscode"):
        events = session_events(sessions, tmp_path, seed=1, editor=editor)
        text = dumps_event(header()) + "".join(dumps_event(e) for e in events)
        session = parse_session(text.splitlines(keepends=True))
        assert not session.warnings
        uri = (tmp_path / "pkg" / "pkg/core.py").as_uri()
        opens = [i for i, e in enumerate(session.events) if e["op"] == "open"]
        assert len(opens) == 2  # one document per session, opened and closed in turn
        first = final_text(session.events[:opens[1]], uri)
        assert first == apply_hunks(OLD_CORE, sessions[0].chosen)
        assert final_text(session.events[opens[1]:], uri) == apply_hunks(OLD_CORE, sessions[1].chosen)
        assert sum(1 for e in session.events if e.get("hunk")) == sum(len(s.chosen) for s in sessions)


def test_picking_prefers_different_renames_to_one_rename_again():
    other_old = "def f(size):\n    return size * size\n"
    other_new = "def f(length):\n    return length * length\n"
    sessions = (release_sessions("pkg", {"a.py": OLD_CORE, "b.py": OLD_CORE, "c.py": other_old},
                                 {"a.py": NEW_CORE, "b.py": NEW_CORE, "c.py": other_new}))
    for seed in range(5):
        keys = [s.chosen[0].key for s in pick(sessions, "propagation", 2, seed)]
        assert sorted(keys) == [("count", "limit"), ("size", "length")]


def test_substitutions_are_renames_strings_and_arguments_added():
    from tabd.daemon.sessions.hunks import is_substitution

    assert is_substitution(("count", "limit")) and is_substitution(("self._conv", "conv"))
    assert is_substitution(("'a'", "'b'")) and is_substitution(("''", '""'))
    assert is_substitution(("", ", mode"))
    assert not is_substitution(("'''", '"""')) and not is_substitution(("=", '": ')) and not is_substitution(("1", "2"))
    assert not is_substitution(("", "(")) and not is_substitution(None)


def test_the_bench_refuses_distributions_that_are_not_held_out_and_finds_its_edit_sources():
    from tabd.daemon.bench.edits import RELEASES, held_out_problems, source_flags

    assert held_out_problems([name for name, _, _ in RELEASES]) == []  # never trained on, not installed here
    problems = held_out_problems(["pytest", "pandas"])
    assert any("pytest" in p and "installed" in p for p in problems)
    assert any("pandas" in p and "training corpus" in p for p in problems)
    assert source_flags("propagation") is not None  # the server's first edit source
    flags = source_flags("model")
    assert flags is None or flags[-1] == "model"
