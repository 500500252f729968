"""The decode budget of a request the user waits for (--max-predict-ms): the prefill's overrun of --max-prompt-ms
comes out of it, and the decode stops before a step that would end past it."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tabd.predictor.backends.backend_settings import LocalSettings
from tabd.predictor.backends.local import LocalBackend, within


def test_a_step_is_taken_only_where_it_fits_at_the_mean_step_time_so_far():
    assert within(1.0, 0.0, 0)  # the first token came with the prefill: nothing measured, go on
    assert within(1.0, 0.5, 5)  # 0.1 s a step: the next ends at 0.6
    assert within(1.0, 0.9, 9)  # ... at exactly 1.0
    assert not within(1.0, 0.95, 5)  # 0.19 s a step: the next would end at 1.14


@pytest.mark.parametrize("prompt_ms, predict_ms, prefill_s, budget", [
    (500, 1000, 0.3, 1.0),  # the prefill kept to its budget: the whole decode budget
    (500, 1000, 0.8, 0.7),  # 0.3 s over: the two budgets bound the request together
    (500, 1000, 2.0, 1e-3),  # far over: a token's worth (the first token is shown)
    (0, 1000, 2.0, 1.0),  # no prompt budget: nothing to overrun
    (500, 0, 0.8, 0.0),  # no decode budget: no bound
])
def test_the_prefill_overrun_comes_out_of_the_decode_budget(prompt_ms, predict_ms, prefill_s, budget):
    backend = SimpleNamespace(settings=LocalSettings(max_prompt_ms=prompt_ms, max_predict_ms=predict_ms))
    assert LocalBackend._decode_budget(backend, prefill_s) == pytest.approx(budget)  # type: ignore[arg-type]



def test_a_pass_that_brought_several_tokens_is_counted_whole():
    # 4 tokens in 0.5 s, three of them drafts one verify pass of 0.3 s accepted: 0.125 s a token, but a pass takes 0.3
    assert within(1.0, 0.5, 4)  # by the mean alone the next would end at 0.625
    assert within(1.0, 0.5, 4, longest_s=0.3)  # ... it ends at 0.8: it fits
    assert not within(1.0, 0.8, 5, longest_s=0.3)  # ... a pass later it would end at 1.1: the answer is what it has
