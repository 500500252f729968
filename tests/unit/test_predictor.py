"""The local backend on the embedded model: KV reuse equals recompute, token for token; loader errors."""
from __future__ import annotations

import json
import shutil

import pytest

from tabd.predictor.loading.loader import DEFAULT_MODEL_DIR, check_model_dir
from tabd.predictor.backends.local import LocalBackend
from tabd.predictor.backends.backend_settings import LocalSettings
from tabd.predictor.prompt.templates import detect_family, template_for
from tabd.predictor.types import GenSettings, Interrupted, ModelLoadError, Query

from support.predictor_cases import CODE, edits, same_tokens_over_edits



@pytest.fixture(scope="module")
def reuse():
    return LocalBackend(LocalSettings(kv_reuse=True, engine="torch+native", threads=1))


@pytest.fixture(scope="module")
def fresh():
    # transformers' own forward (its older name, plain, still accepted), the whole prompt every time
    return LocalBackend(LocalSettings(kv_reuse=False, engine="transformers", threads=1))


@pytest.fixture(scope="module")
def chunked():
    # prefill in chunks of 16 tokens (the embedded model's default is one chunk of 2048)
    return LocalBackend(LocalSettings(kv_reuse=True, engine="torch+native", threads=1, prefill_chunk=16))






def test_greedy_with_kv_reuse_equals_full_recompute(reuse, fresh, chunked):
    settings = GenSettings(max_new_tokens=24)
    steps = 0
    for prefix, suffix in edits():
        a = reuse.predict(Query(prefix, suffix, settings, slot_id="doc"))
        tokens_a = list(reuse.last_tokens)
        b = fresh.predict(Query(prefix, suffix, settings, slot_id="doc"))
        assert tokens_a == fresh.last_tokens, f"step {steps}: reuse diverged from recompute"
        assert a.text == b.text
        chunked.predict(Query(prefix, suffix, settings, slot_id="doc"))
        assert chunked.last_tokens == tokens_a, f"step {steps}: chunked prefill diverged from one chunk"
        assert b.reused_tokens == 0
        # accept what was suggested, as Tab would, and go on from there
        if a.text:
            c = reuse.predict(Query(prefix + a.text, suffix, settings, slot_id="doc"))
            d = fresh.predict(Query(prefix + a.text, suffix, settings, slot_id="doc"))
            assert reuse.last_tokens == fresh.last_tokens and c.text == d.text
        steps += 1
    assert steps >= 15


def test_transformers_forward_with_the_in_place_cache_agrees():
    hf = LocalBackend(LocalSettings(kv_reuse=True, engine="transformers", threads=1))
    fast = LocalBackend(LocalSettings(kv_reuse=True, engine="torch+native", threads=1))
    assert fast.engine_name == "torch+native" and hf.engine_name == "transformers"
    settings = GenSettings(max_new_tokens=16)
    same_tokens_over_edits(hf, fast, settings, 6)


def long_prompt() -> tuple[str, str]:
    prefix = CODE * 3 + CODE[: CODE.index("        return self.data.get")] + "        return "
    return prefix, CODE[CODE.index("\n\n    def set") :]


def test_an_interrupted_prefill_keeps_its_chunks_for_the_next_request(chunked, reuse):
    """Stopped before its third chunk, a prefill leaves two chunks in the slot; the retry runs only the rest
    and suggests what an uninterrupted prefill does."""
    settings = GenSettings(max_new_tokens=16)
    prefix, suffix = long_prompt()
    checks = []

    def stop_at_third_chunk() -> bool:
        checks.append(1)
        return len(checks) >= 3

    with pytest.raises(Interrupted):
        chunked.predict(Query(prefix, suffix, settings, slot_id="i"), stop_at_third_chunk)
    assert len(chunked.pool.slots["i"].ids) == 2 * chunked.prefill_chunk
    again = chunked.predict(Query(prefix, suffix, settings, slot_id="i"))
    assert again.reused_tokens == 2 * chunked.prefill_chunk
    want = reuse.predict(Query(prefix, suffix, settings, slot_id="i-whole"))
    assert chunked.last_tokens == reuse.last_tokens and again.text == want.text


def test_a_request_preempts_a_prefilling_prefetch_between_chunks(chunked):
    """Through the real scheduler: a request submitted while a prefetch prefills runs after the chunk in
    flight; the prefetch then resumes from the chunks it had run, not from the start."""
    from tabd.daemon.runtime.scheduler import FOREGROUND, Scheduler

    settings = GenSettings(max_new_tokens=8)
    prefix, suffix = long_prompt()
    chunked.pool.slots.clear()  # a slot an earlier test left with this prompt would be copied from (copy-on-write)
    scheduler, order, runs = Scheduler(), [], []
    jobs = {}

    def prefetch(stop):
        calls = []

        def should_stop() -> bool:
            calls.append(1)
            if len(calls) == 2 and "fg" not in jobs:  # the user types while the prefetch is in its second chunk
                jobs["fg"] = scheduler.submit(lambda s: order.append("request") or chunked.predict(Query(CODE[:300], "", settings, slot_id="other"), s), FOREGROUND)
            return stop()

        p = chunked.predict(Query(prefix, suffix, settings, slot_id="bg"), should_stop)
        runs.append(p)
        order.append("prefetch done")
        return p

    bg = scheduler.submit(prefetch, 1)
    try:
        result = bg.future.result(60)
        jobs["fg"].future.result(60)
    finally:
        scheduler.stop()
    assert order == ["request", "prefetch done"] and bg.preemptions == 1
    assert result.reused_tokens == chunked.prefill_chunk  # the chunk before the request came was kept


def test_reuse_runs_only_the_changed_tokens(reuse):
    settings = GenSettings(max_new_tokens=8)
    prefix, suffix = CODE[:600], CODE[600:]
    reuse.predict(Query(prefix, suffix, settings, slot_id="r"))
    again = reuse.predict(Query(prefix + "x", suffix, settings, slot_id="r"))
    assert again.reused_tokens > 0.9 * (again.reused_tokens + again.prefill_tokens)
    assert again.prefill_tokens <= 4


def test_prefetch_after_accept_reuses_the_decoded_sequence(reuse):
    settings = GenSettings(max_new_tokens=24)
    # a prompt of the daemon's usual size (its prefix window is 2400 characters)
    prefix = CODE * 3 + CODE[: CODE.index("        return self.data.get")] + "        return "
    suffix = CODE[CODE.index("\n\n    def set") :]
    first = reuse.predict(Query(prefix, suffix, settings, slot_id="p"))
    assert first.text
    after = reuse.predict(Query(prefix + first.text, suffix, settings, slot_id="p"))
    total = after.reused_tokens + after.prefill_tokens
    assert after.reused_tokens / total >= 0.95


def test_slots_keep_two_documents_apart(reuse):
    settings = GenSettings(max_new_tokens=4)
    a, b = CODE[:500], CODE[200:900]
    reuse.predict(Query(a, "", settings, slot_id="a"))
    reuse.predict(Query(b, "", settings, slot_id="b"))
    back = reuse.predict(Query(a + "y", "", settings, slot_id="a"))
    assert back.reused_tokens > 0.9 * (back.reused_tokens + back.prefill_tokens)


def test_a_prompt_longer_than_the_context_is_trimmed(reuse):
    huge = CODE * 200
    p = reuse.predict(Query(huge, huge, GenSettings(max_new_tokens=4), slot_id="huge"))
    assert p.prefill_tokens + p.reused_tokens <= reuse.context


def test_model_directory_errors_name_the_problem(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        check_model_dir(tmp_path / "missing")
    with pytest.raises(ModelLoadError, match="config.json"):
        check_model_dir(tmp_path)
    d = tmp_path / "m"
    shutil.copytree(DEFAULT_MODEL_DIR, d)
    config = json.loads((d / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.Evil"}
    (d / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="remote code"):
        check_model_dir(d)
    for f in d.glob("*.safetensors"):
        f.rename(f.with_suffix(".bin"))
    with pytest.raises(ModelLoadError, match="safetensors"):
        check_model_dir(d, trust_remote_code=True)


def test_templates_are_chosen_from_special_tokens():
    assert detect_family({"<tabd_pre>", "<tabd_suf>", "<tabd_mid>"}) == "tabd"
    assert detect_family({"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"}) == "qwen2.5-coder"
    assert detect_family({"<fim_prefix>", "<fim_suffix>", "<fim_middle>"}) == "starcoder2"
    assert detect_family({"<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"}) == "deepseek-coder"
    assert detect_family({"▁<PRE>", "▁<SUF>", "▁<MID>"}) == "codellama"
    assert detect_family({"<s>", "</s>"}) == "plain"
    spm = template_for("starcoder2", "spm").pieces("P", "S")
    assert spm[-1] == ("P", False)  # the prefix runs straight into the middle
    psm = template_for("qwen2.5-coder").pieces("P", "S")
    assert [t for t, _ in psm] == ["<|fim_prefix|>", "P", "<|fim_suffix|>", "S", "<|fim_middle|>"]
    with pytest.raises(ValueError):
        template_for("qwen2.5-coder", "spm")
    assert template_for("tabd").pieces("P", "S") == [("<tabd_suf>", True), ("S", False), ("<tabd_pre>", True), ("P", False)]


def test_teacher_forced_scores_equal_the_probabilities_recorded_while_decoding():
    """score_tokens over the greedy tokens gives back decode's own per-token probabilities (what gating cuts by)."""
    from tabd.predictor.engine import generate

    backend = LocalBackend(LocalSettings(DEFAULT_MODEL_DIR, device="cpu", threads=1))
    prefix = "import os\n\n\ndef read(path):\n    with open(path) as fh:\n        return fh."
    layout = backend.layout(prefix, "\n", 16)
    cache = backend.pool.new_cache(len(layout.ids) + 32)
    logits = generate.prefill(backend.runner, layout.ids, cache)
    decoded = generate.decode_n_tokens(backend.runner, logits.clone(), cache,
                                       generate.Rule(8, first_allowed=backend._allowed_first(layout.heal)))
    tokens, probs = decoded.tokens, decoded.probs
    assert len(tokens) == len(probs) == 8 and all(0 < p <= 1 for p in probs)
    cache2 = backend.pool.new_cache(len(layout.ids) + 32)
    logits2 = generate.prefill(backend.runner, layout.ids, cache2)
    scored = generate.score_tokens(backend.runner, logits2, cache2, tokens, 0.0, backend._allowed_first(layout.heal))
    assert [round(p, 4) for p in scored.probs] == [round(p, 4) for p in probs]


def test_a_verified_copy_is_gated_on_the_model_s_own_probabilities(fixture_model):
    """A copy is judged as the model's own text is: its verified part carries the model's probability of each
    copied token (not a blanket 1), so --min-confidence cuts a copy where the model's joint belief drops."""
    from support.fixture_model import SUGGESTION

    from tabd.predictor.text.postprocess import gate

    backend = LocalBackend(LocalSettings(fixture_model, device="cpu", threads=1))
    prefix = "    result = total() + 1\n    other = 2\n    result ="
    own = backend.predict(Query(prefix, "\n", GenSettings(lookup_min_p=0.0)))
    copy = backend.predict(Query(prefix, "\n", GenSettings(lookup_min_p=0.001)))
    assert own.text == SUGGESTION and copy.text == " total() + 1"
    n = len(own.confidence)
    assert n >= 2 and [p for _, p in copy.confidence[:n]] == pytest.approx([p for _, p in own.confidence], abs=1e-3)
    assert copy.confidence[-1] == (len(copy.text), 0.0)  # the unverified tail: shown only when invoked
    joint = own.confidence[0][1] * own.confidence[1][1]
    assert gate(copy.text, copy.confidence, joint - 1e-4) == SUGGESTION
    assert gate(copy.text, copy.confidence, joint + 1e-4) == " total"  # the second token takes the whole below it


def test_a_copy_candidate_is_shown_as_far_as_the_model_verifies_it(fixture_model):
    """The fixture model writes ` total()` and finds any other token near impossible (tests/fixture_model.py)."""
    from support.fixture_model import SUGGESTION

    from tabd.predictor.text.lookup import copy_suggestion
    from tabd.predictor.text.postprocess import gate

    backend = LocalBackend(LocalSettings(fixture_model, device="cpu", threads=1))
    on, off = GenSettings(lookup_min_p=0.001), GenSettings(lookup_min_p=0.0)
    # a copy the model agrees with as far as ` total()`: shown, verified that far
    prefix = "    result = total() + 1\n    other = 2\n    result ="
    assert copy_suggestion(prefix) == " total() + 1"
    assert backend.predict(Query(prefix, "\n", off)).text == SUGGESTION  # no verification: the model's own guess
    verified = backend.predict(Query(prefix, "\n", on))
    assert verified.text == " total() + 1"
    assert gate(verified.text, verified.confidence, 0.9) == SUGGESTION  # the verified part passes any gate
    assert gate(verified.text, verified.confidence, 0.0) == " total() + 1"  # an invoked request sees it all
    # never verified at a joint probability of 1: the model's own guess is all there is
    assert backend.predict(Query(prefix, "\n", GenSettings(lookup_min_p=1.0))).text == SUGGESTION
    # a copy the model rejects at its first token is not shown: the model's own guess is
    prefix = "    value = compute(1)\n    other = 2\n    value ="
    assert copy_suggestion(prefix) == " compute(1)"
    assert backend.predict(Query(prefix, "\n", on)).text == SUGGESTION


def test_token_healing_allows_every_token_that_starts_with_the_backed_off_text(reuse):
    vocab = reuse.vocab_text()
    for heal in ("s", "se", "self", "re", "x", "_", "Tr", "get", "zzzq"):
        scan = [i for i, t in enumerate(vocab) if t.startswith(heal) and i not in reuse.stop_ids]
        got = reuse._allowed_first(heal)
        assert (got.tolist() if got is not None else []) == scan, heal  # the same ids, in the same order
    assert reuse._allowed_first("") is None



def test_a_fim_marker_is_never_the_first_token_and_keeps_its_share_of_the_probability():
    """The best other token is chosen, at the probability the model gave it (not renormalised: the gate sees
    how unsure the model was); with numpy logits (the torch-free runner) too."""
    import numpy as np
    import torch

    from tabd.predictor.engine.runner import greedy_p

    logits = torch.log(torch.tensor([0.05, 0.6, 0.25, 0.1]))  # id 1 plays the marker
    token, p = greedy_p(logits, banned=[1])
    assert token == 2 and abs(p - 0.25) < 1e-6
    token, p = greedy_p(logits.numpy().astype(np.float32), banned=[1])
    assert token == 2 and abs(p - 0.25) < 1e-6
    assert greedy_p(logits)[0] == 1


@pytest.mark.parametrize("engine", ["torch+native", "torch-free"])
def test_where_a_marker_is_likeliest_the_next_best_text_is_shown_at_its_own_probability(engine):
    """The shipped model's logits with `<tabd_pre>` made the likeliest first token (by e^5 over the best other:
    what weights that learnt markers did at 35 of 400 probed places): the suggestion is the model's best text,
    not empty and no marker, and its first token keeps its small share, so the gate hides it."""
    backend = LocalBackend(LocalSettings(engine=engine, threads=1))
    marker = backend.tokenizer.convert_tokens_to_ids("<tabd_pre>")
    real = backend._prefill

    def marker_first(*args, **kwargs):
        slot, reused, logits = real(*args, **kwargs)
        logits = logits.clone() if hasattr(logits, "clone") else logits.copy()
        logits[marker] = logits.max() + 5
        return slot, reused, logits

    backend._prefill = marker_first
    settings = GenSettings(lookup_min_p=0.0, known_names=False)  # the model's own text: no copy, no names rule
    p = backend.predict(Query("def add(a, b):\n    return ", "\n", settings))
    assert p.text and "<tabd_" not in p.text
    assert p.confidence[0][1] < 0.01  # at most 1 / (1 + e^5): not renormalised as if the marker were not there


def test_the_shipped_model_never_shows_a_fim_marker():
    """The markers are banned as the first token and end a suggestion after it; EOT stops too."""
    from pathlib import Path

    from tabd.predictor.prompt.fim import SPECIAL_TOKENS

    backend = LocalBackend(LocalSettings(str(Path(__file__).resolve().parents[2] / "predictor" / "model"), device="cpu", threads=1))
    ids = {t: backend.tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    assert sorted(backend.marker_ids) == sorted(ids[t] for t in ("<tabd_pre>", "<tabd_suf>", "<tabd_mid>", "<tabd_pad>"))
    assert set(ids.values()) <= backend.stop_ids
