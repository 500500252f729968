"""The prefill budget's parts: the lines nearest the cursor, the measured speed, and chunks bounded in time."""
from __future__ import annotations

from tabd.predictor.engine.chunking import CHUNK_FLOOR, CHUNK_MS, FOREGROUND_MS, chunk_within
from tabd.predictor.backends.local import PrefillSpeed, cut_to_lines


def test_the_short_window_keeps_whole_lines_nearest_the_cursor():
    prefix = "".join(f"line {i}\n" for i in range(100)) + "    total = "
    head = cut_to_lines(prefix, 40, from_end=True)
    assert prefix.endswith(head) and head.endswith("    total = ")
    assert head.startswith("line ") and len(head) <= 40 + len("line 99\n")
    assert cut_to_lines("a very long cursor line with no break", 5, from_end=True) == "a very long cursor line with no break"
    suffix = ")\n" + "".join(f"after {i}\n" for i in range(50))
    tail = cut_to_lines(suffix, 20, from_end=False)
    assert suffix.startswith(tail) and tail.endswith("\n") and len(tail) <= 20
    assert cut_to_lines("short", 100, from_end=True) == "short"


def test_the_speed_is_guessed_from_the_size_then_measured():
    speed = PrefillSpeed(500_000_000)
    assert speed.ms(1000) > 10_000  # a 0.5B model is guessed slow until measured (a cold prompt goes short)
    speed.ran(100, 5.0)  # the first pass pages the weights in: not the rate
    assert speed.ms(1000) > 10_000
    speed.ran(100, 0.5)
    assert speed.ms_per_token == 5.0
    speed.ran(2, 10.0)  # a keystroke's few tokens say nothing of the rate
    assert speed.ms_per_token == 5.0
    assert speed.tokens_in(500) == 100


def test_a_chunk_takes_at_most_the_time_bound_down_to_the_floor():
    assert chunk_within(2048, 0.01) == 2048  # a small model's prompt in one chunk, as before
    assert chunk_within(256, 4.0) * 4.0 <= CHUNK_MS
    assert chunk_within(256, 25.0) == CHUNK_FLOOR  # a slow machine: the floor, over the bound
    assert chunk_within(CHUNK_FLOOR // 2, 100.0) == CHUNK_FLOOR // 2  # never above what the size allows
    # a request the user waits for may run chunks up to its own prompt budget (longer native passes are cheaper)
    assert chunk_within(256, 12.0, FOREGROUND_MS) == 32 and chunk_within(256, 12.0) == 16


def test_a_short_window_preempted_mid_prefill_resumes_on_the_same_window_from_its_chunks():
    import pytest

    from tabd.predictor.backends.backend_settings import LocalSettings
    from tabd.predictor.backends.local import LocalBackend
    from tabd.predictor.types import GenSettings, Interrupted, Query

    backend = LocalBackend(LocalSettings(kv_reuse=True, engine="torch+native", threads=1, prefill_chunk=16, max_prompt_ms=100))
    prefix = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(200)) + "def g(y):\n    return "
    settings = GenSettings(max_new_tokens=4)
    backend.prefill_speed.ms_per_token = 1.0  # 100 tokens fit the budget: the whole window does not
    checks = []

    def stop_at_third_chunk() -> bool:
        checks.append(1)
        return len(checks) > 3

    with pytest.raises(Interrupted):
        backend.predict(Query(prefix, "", settings, slot_id="a"), stop_at_third_chunk)
    backend.prefill_speed.ms_per_token = 1.7  # measured meanwhile: a new pick would be another, shorter window
    resumed = backend.predict(Query(prefix, "", settings, slot_id="a"))
    assert resumed.window_chars < len(prefix) // 4  # the short window
    assert resumed.reused_tokens >= 3 * 16  # the three chunks run before the stop were not run again


def test_the_wait_before_a_run_is_taken_from_the_prefill_budget_and_then_from_the_decode_budget():
    from tabd.predictor.backends.backend_settings import LocalSettings
    from tabd.predictor.backends.local import SHORT_MIN_TOKENS, LocalBackend
    from tabd.predictor.types import GenSettings, Query

    backend = LocalBackend(LocalSettings(kv_reuse=True, engine="torch+native", threads=1, max_prompt_ms=256,
                                         max_predict_ms=1000))
    settings = GenSettings(max_new_tokens=4)
    tokens = {}
    decoded = {}
    for waited in (0.0, 128.0, 5000.0):  # each its own text: no slot holds any of it
        prefix = "".join(f"def f{i}_{waited:g}(x):\n    return x + {i}\n" for i in range(200)) + "def g(y):\n    return "
        backend.prefill_speed.ms_per_token = 1.0  # 256 tokens fit the budget: the whole window does not
        p = backend.predict(Query(prefix, "", settings, slot_id=f"w{waited:g}", waited_ms=waited))
        tokens[waited] = p.prefill_tokens + p.reused_tokens
        decoded[waited] = p.decode_tokens
        assert p.wait_ms == waited  # what the log's wait_ms says
    # the window is chosen for what the wait left: 256 tokens, 128, and past the budget the shortest
    assert tokens[5000.0] < 2 * SHORT_MIN_TOKENS < tokens[128.0] < 2 * 128 < tokens[0.0] < 2 * 256, tokens
    # a prefetch has no one waiting: no budget, the whole window
    background = backend.predict(Query(prefix, "", settings, slot_id="bg", priority=1, waited_ms=1000.0))
    assert background.wait_ms == 0 and background.window_chars == len(prefix)
    # the decode gets what the wait and the prefill left of the two budgets together: after a wait of 5 s, a token's
    # worth (the step after the first, which comes with the prefill, is not taken where it would not fit)
    assert decoded[5000.0] < decoded[0.0]


def test_a_keystroke_that_waited_goes_on_in_the_short_window_kept_in_the_kv_rather_than_a_shorter_one():
    from tabd.predictor.backends.backend_settings import LocalSettings
    from tabd.predictor.backends.local import LocalBackend
    from tabd.predictor.types import GenSettings, Query

    backend = LocalBackend(LocalSettings(kv_reuse=True, engine="torch+native", threads=1, max_prompt_ms=256))
    prefix = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(200)) + "def g(y):\n    return "
    settings = GenSettings(max_new_tokens=4)
    backend.prefill_speed.ms_per_token = 1.0
    first = backend.predict(Query(prefix, "", settings, slot_id="a"))
    backend.prefill_speed.ms_per_token = 1.0
    # the next keystroke waited past the budget behind other work: its window's keys and values are kept, so it
    # costs a token, and the window the wait alone would leave (32 tokens) would cost more and know less
    key = backend.predict(Query(prefix + "y", "", settings, slot_id="a", waited_ms=1000.0))
    assert 128 < first.prefill_tokens + first.reused_tokens <= 256 + 8
    assert key.window_chars == first.window_chars + 1
    assert key.prefill_tokens <= 2
