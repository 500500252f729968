"""bench quality groups the files it types by language, as the daemon reads a file's language from its extension."""
from __future__ import annotations

from tabd.daemon.bench.quality import by_language


def test_files_are_grouped_by_language():
    groups = by_language(["a/x.py", "b/y.JS", "c/z.ts", "d/w.py", "e/notes"])
    assert groups == {"python": ["a/x.py", "d/w.py"], "javascript": ["b/y.JS"], "typescript": ["c/z.ts"],
                      "plaintext": ["e/notes"]}
