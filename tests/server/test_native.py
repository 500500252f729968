"""The native decode step (predictor/engine/native/decode.c) against the torch step it replaces, and its fallbacks."""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import textwrap

import pytest
import torch

from tabd.predictor.engine import generate, native
from tabd.predictor.loading.loader import DEFAULT_MODEL_DIR
from tabd.predictor.backends.local import LocalBackend
from tabd.predictor.backends.backend_settings import LocalSettings
from tabd.predictor.types import GenSettings, Query

from support.predictor_cases import CODE, edits, same_tokens_over_edits

LIB, WHY = native.load()
needs_native = pytest.mark.skipif(LIB is None, reason=f"no native build here: {WHY}")


@pytest.fixture(scope="module")
def backend():
    return LocalBackend(LocalSettings(kv_reuse=True, engine="torch+native", threads=1))


def prompt_ids(backend, n: int) -> list[int]:
    ids = backend.tokenizer.encode(CODE * 40, add_special_tokens=False)
    return ids[:n]


@needs_native
@pytest.mark.parametrize("threads", [1, 2, 3])  # 3 threads > 2 KV heads: one query head per task instead
@pytest.mark.parametrize("context", [1, 7, 300, 1900])
def test_a_native_step_gives_the_torch_step_logits_and_cache(backend, threads, context):
    fast = backend.runner
    assert fast.native is not None, fast.native_why
    ids = prompt_ids(backend, context + 1)
    a, b = fast.new_cache(2048), fast.new_cache(2048)
    if context > 1:
        generate.prefill(fast, ids[:context], a)
        generate.prefill(fast, ids[:context], b)
    else:
        a.length = b.length = 0
    saved, old_threads = fast.native, torch.get_num_threads()
    torch.set_num_threads(threads)  # 2 threads: one KV head's query group each; 1: all on one
    try:
        fast.native = None
        want = fast.forward_last([ids[context]], a)
        fast.native = saved
        best, got = saved.step(ids[context], b)
    finally:
        fast.native = saved
        torch.set_num_threads(old_threads)
    assert best == int(torch.argmax(want)) == int(torch.argmax(got))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    end = b.length
    assert end == a.length == (context if context > 1 else 0) + 1
    torch.testing.assert_close(b.k[:, :, :end], a.k[:, :, :end], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(b.v[:, :, :end], a.v[:, :, :end], rtol=1e-4, atol=1e-5)


@needs_native
@pytest.mark.parametrize("threads, weights", [(1, "fp32"), (3, "fp32"), (1, "bf16"), (3, "int8")])
@pytest.mark.parametrize("head_dim", [64, 128, 48, 20])  # 48, 20: the plain per-head loop
def test_other_shapes_one_kv_head_odd_widths(threads, head_dim, weights):
    """Llama shapes unlike the embedded model's: head_dim 64, 128 (vector kernels), 48 and 20; 4 query heads
    on 1 KV head; matrix widths (200, 300) that leave a partial column panel; a bias on q/k/v as Qwen2 has."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tabd.predictor.engine.model import FastLlama

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=300, hidden_size=128, intermediate_size=200, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=1, head_dim=head_dim, max_position_embeddings=256)
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():
        for layer in model.model.layers:  # the init leaves biases at 0, which would not test them
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    fast = FastLlama(model, weights=weights)  # torch's forward reads the same bf16/int8 numbers as the native step
    assert fast.native is not None, fast.native_why
    ids = torch.randint(0, 300, (120,)).tolist()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = fast.new_cache(256), fast.new_cache(256)
        generate.prefill(fast, ids[:100], a)
        generate.prefill(fast, ids[:100], b)
        saved = fast.native
        for token in ids[100:]:
            fast.native = None
            want = fast.forward_last([token], a)
            fast.native = saved
            best, got = saved.step(token, b)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            assert best == int(torch.argmax(want))
        torch.testing.assert_close(b.k[:, :, :120], a.k[:, :, :120], rtol=1e-4, atol=1e-5)
    finally:
        torch.set_num_threads(old_threads)


@needs_native
def test_native_and_torch_engines_suggest_the_same_tokens_over_an_edit_session(backend):
    torch_only = LocalBackend(LocalSettings(kv_reuse=True, engine="torch", threads=1))
    assert backend.engine_name == "torch+native" and torch_only.engine_name == "torch"
    settings = GenSettings(max_new_tokens=24)
    assert all(a.text == b.text for a, b in same_tokens_over_edits(backend, torch_only, settings, slot_id="n"))


RUNNERS = {"torch-free": "TorchFreeRunner", "torch+native": "FastLlama", "torch": "FastLlama",
           "transformers": "TransformersRunner"}


@needs_native
@pytest.mark.parametrize("asked, reported", [
    ("torch-free", "torch-free"), ("native", "torch-free"), ("auto", "torch-free"), ("torch+native", "torch+native"),
    ("fast", "torch+native"), ("torch", "torch"), ("transformers", "transformers"), ("hf", "transformers"),
    ("plain", "transformers")])
def test_each_engine_name_old_or_new_builds_the_engine_it_names_reported_by_its_one_name(asked, reported):
    """--engine takes the names that say what runs (predictor/loading/engine_names.py) and the older ones for the same
    engines; tabd/stats, the log and Prediction.engine report each engine by its one name, whichever name asked."""
    b = LocalBackend(LocalSettings(engine=asked, threads=1))
    assert b.engine_name == reported and type(b.runner).__name__ == RUNNERS[reported]
    if reported in ("torch+native", "torch"):  # the same forward, its steps in native code or in torch
        assert (b.runner.native is not None) == (reported == "torch+native")
    assert b.predict(Query("def area(width, height):\n    return ", "", GenSettings(8))).engine == reported


def test_an_unknown_engine_name_says_which_there_are():
    from tabd.predictor.types import ModelLoadError

    with pytest.raises(ModelLoadError, match="unknown engine 'fastest': use auto, torch-free, torch\\+native") as err:
        LocalBackend(LocalSettings(engine="fastest"))
    assert err.value.setting == "engine"


@needs_native
def test_out_of_range_input_is_an_error_not_a_crash(backend):
    fast = backend.runner
    cache = fast.new_cache(64)
    with pytest.raises(ValueError, match="refused token"):
        fast.native.step(10**6, cache)
    assert cache.length == 0
    cache = fast.new_cache(fast.cos.shape[0] + 8)
    cache.length = fast.cos.shape[0]  # past the model's positions
    with pytest.raises(ValueError, match="refused token"):
        fast.native.step(1, cache)


@needs_native
def test_the_build_is_cached_by_source_and_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("TABD_CACHE", str(tmp_path))
    first = native.build()
    stamp = first.stat().st_mtime_ns
    assert first.parent == tmp_path / "native" and first.stat().st_mode & 0o111
    assert native.build() == first and first.stat().st_mtime_ns == stamp  # no second compile


def run_child(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


CHILD = """
    from tabd.predictor.backends.local import LocalBackend
    from tabd.predictor.backends.backend_settings import LocalSettings
    from tabd.predictor.types import GenSettings, Query
    fast = LocalBackend(LocalSettings(engine="torch+native", threads=1))
    reference = LocalBackend(LocalSettings(engine="transformers", threads=1))
    s = GenSettings(16)
    prefix = "def area(width, height):\\n    return "
    assert fast.predict(Query(prefix, "", s)).text == reference.predict(Query(prefix, "", s)).text
    print(fast.engine_name, "|", fast.runner.native_why)
"""


@pytest.mark.parametrize("cc, why", [("/nonexistent/cc", "failed|No such file"), ("false", "false failed")])
def test_without_a_working_compiler_the_engine_runs_in_torch(tmp_path, cc, why):
    r = run_child(CHILD, {"CC": cc, "TABD_CACHE": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    name, _, reason = r.stdout.strip().rpartition("\n")[2].partition(" | ")
    assert name == "torch"
    assert re.search(why, reason), reason


# -- tabd bench engines --------------------------------------------------------------------------------

def bench_engines(env: dict | None = None, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "engines", "--json", *extra],
                          capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})})


def test_bench_engines_without_llama_cpp_says_so_and_still_reports_tabd(tmp_path):
    (tmp_path / "llama_cpp.py").write_text("raise ImportError('hidden from this test')\n")
    r = bench_engines({"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}, "--engines-rounds", "1")
    assert r.returncode == 1
    assert "tabd bench engines: llama.cpp is not installed" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1  # one line, not a traceback or a log
    d = json.loads(r.stdout)["engines"]
    assert d["shape"] == "embedded" and d["llamacpp"].startswith("unavailable: llama.cpp is not installed")
    assert d["tabd"]["keystroke_16"] > 0 and d["tabd"]["prefill_per_1k"] > 0 and "ratios" not in d
    # resident memory of the tabd worker, beside the weights it holds once
    assert d["weights_file_bytes"] == (DEFAULT_MODEL_DIR / "model.safetensors").stat().st_size
    assert d["weights_file_bytes"] < d["rss_bytes"] < 1 << 30
    assert d["weight_bytes_held"] <= 2 * d["weights_file_bytes"]  # a model this small keeps plain prefill copies too
    assert d["lookup"]["same_output"] is True and d["lookup"]["tokens"] > 0


def test_bench_engines_without_a_gguf_converter_says_so(tmp_path):
    (tmp_path / "llama_cpp.py").write_text("")  # importable; the GGUF asked for does not exist
    r = bench_engines({"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
                      "--engines-gguf", str(tmp_path / "missing.gguf"), "--engines-rounds", "1")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "missing.gguf" in r.stderr


@needs_native
def test_bench_lookup_runs_both_sessions_on_and_off_with_the_same_output():
    r = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "lookup", "--json", "--lookup-passes", "1"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["lookup"]
    assert d["shape"] == "embedded" and d["threads"] == 1
    costs = d["pass_costs"]
    assert costs["step_ms"] > 0 and sorted(costs["pass_ms"]) == [str(n) for n in range(1, 9)]
    assert costs["pass_over_step"]["8"] == pytest.approx(costs["pass_ms"]["8"] / costs["step_ms"], abs=0.011)
    for name in ("line_ends", "keystrokes"):
        s = d[name]
        assert s["same_output"] is True and s["tokens"] > 0
        assert s["passes"] < s["tokens"]  # drafts and the copies' verification rode along in fewer passes
        assert s["speedup"] == pytest.approx(s["decode_ms_plain"] / s["decode_ms_lookup"], abs=0.011)
        assert s["decode_speedup_paired"] == pytest.approx(statistics.median(s["decode_speedups_by_pass"]), abs=0.011)
        assert len(s["decode_speedups_by_pass"]) == s["passes_over_states"] == 1
        assert s["decode_speedup_paired"] == pytest.approx(s["speedup"], abs=0.011)  # one pass: the same ratio
        assert s["speedup_after_prefill"] == pytest.approx(
            s["after_prefill_ms_plain"] / s["after_prefill_ms_lookup"], abs=0.011)
    assert d["keystrokes"]["accepted_drafts"] > 0  # mid-line, the model agrees with what the pattern above says
    from tabd.predictor.bench.engines import repetitive_states as session

    assert d["keystrokes"]["states"] == len(session(12)) and d["line_ends"]["states"] == len(session())
    whole = session()[0][0] + session()[0][1]
    assert all(p.endswith("\n") and p + s == whole for p, s in session())  # line ends, the rest after the cursor
    cuts = [len(p) for p, s in session(12) if s == "\n"]
    assert len(cuts) == len(session(12)) and all(b - a == 12 for a, b in zip(cuts, cuts[1:]))  # every 12 chars
    assert any(not p.endswith("\n") for p, _ in session(12))  # mid-line requests, as while typing
    bad = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "lookup", "--lookup-passes", "0"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "--lookup-passes must be at least 1" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.llamacpp
@pytest.mark.slow
def test_bench_engines_measures_both_engines_side_by_side():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (see the README's llama.cpp section)")
    r = bench_engines(None, "--engines-rounds", "1", "--engines-torch")
    if r.returncode == 1 and "cannot make the model's GGUF" in r.stderr:
        pytest.skip(r.stderr.strip())
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["engines"]
    assert d["tabd_engine"] == ("torch+native" if LIB is not None else "torch")
    keys = ("prefill_512", "prefill_2048", "decode_per_token", "keystroke_first", "keystroke_16", "replace_first", "replace_16")
    for key in keys:
        best = min(d["llamacpp"][key], d["llamacpp_flash_attn"][key])
        assert d["tabd"][key] > 0 and best > 0
        assert d["ratios"][key] == pytest.approx(d["tabd"][key] / best, abs=0.011)
        assert d["tabd_torch"][key] > 0  # --engines-torch: the same engine without native code, beside it
        assert d["native_speedup"][key] == pytest.approx(d["tabd_torch"][key] / d["tabd"][key], rel=0.02, abs=0.011)


# -- prompt-lookup decoding ------------------------------------------------------------------------------

def repetitive_states():
    """A file that repeats its own lines (a table of similar methods), typed a little further each time."""
    body = "".join(f"    def get_{n}(self):\n        return self.data.get('{n}', None)\n\n"
                   for n in ("name", "path", "size", "mode", "user", "group"))
    text = "class Record:\n" + body + "    def get_owner(self):\n        return self.data.get("
    for cut in range(len(text) - 60, len(text) + 1, 12):
        yield text[:cut], "\n"


@needs_native
@pytest.mark.parametrize("engine", ["torch+native", "torch-free"])  # torch-free: numpy buffers
def test_prompt_lookup_gives_the_tokens_and_probabilities_of_plain_decoding(engine):
    from tabd.predictor.bench.engines import repetitive_states as bench_session

    backend = LocalBackend(LocalSettings(kv_reuse=True, engine=engine, threads=1, lookup=True))
    plain = LocalBackend(LocalSettings(kv_reuse=True, engine=engine, threads=1, lookup=False))
    assert backend.engine_name == plain.engine_name == engine
    settings = GenSettings(max_new_tokens=24, multiline=True)
    accepted = batched = 0
    # the edit session, a file typed further each time, and tabd bench lookup's keystrokes session (where the
    # drafts run as far as two earlier copies of the pattern agree)
    for prefix, suffix in [*edits(), *repetitive_states(), *bench_session(12)]:
        a = backend.predict(Query(prefix, suffix, settings, slot_id="l"))
        b = plain.predict(Query(prefix, suffix, settings, slot_id="l"))
        assert backend.last_tokens == plain.last_tokens and a.text == b.text
        assert a.confidence == b.confidence  # each verified token's probability, as one step at a time gives
        assert b.accepted_drafts == 0 and b.decode_passes == b.decode_tokens
        assert a.decode_passes <= a.decode_tokens - a.accepted_drafts  # the copy's verification: several a pass
        accepted += a.accepted_drafts
        batched += a.decode_tokens - a.accepted_drafts - a.decode_passes
    assert accepted > 0  # the repeated lines were drafted from the prompt and the model agreed
    assert batched > 0  # and copy candidates were verified several tokens a pass


@needs_native
@pytest.mark.parametrize("drafts", [1, 3, 7])
def test_verifying_drafts_in_one_pass_gives_the_logits_and_cache_of_single_steps(backend, drafts):
    fast = backend.runner
    ids = prompt_ids(backend, 300 + drafts + 1)
    a, b = fast.new_cache(512), fast.new_cache(512)
    generate.prefill(fast, ids[:300], a)
    generate.prefill(fast, ids[:300], b)
    one = torch.stack([fast.native.step(t, a)[1].clone() for t in ids[300 : 301 + drafts]])
    choices = fast.verify(ids[300 : 301 + drafts], b)
    together = fast.native.logits_buf[: drafts + 1]
    assert torch.equal(one, together)  # bit for bit: each weight is read once for all, summed in the same order
    # the greedy choice and its probability after each, computed in C beside the argmax: torch's softmax numbers
    assert [c for c, _ in choices] == torch.argmax(one, dim=-1).tolist()
    expected = torch.softmax(one, dim=-1).max(dim=-1).values
    assert torch.allclose(torch.tensor([p for _, p in choices]), expected, rtol=1e-5, atol=0)
    assert a.length == b.length and torch.equal(a.k[:, :, : a.length], b.k[:, :, : b.length])


# -- compact weights, held once ------------------------------------------------------------------------

@needs_native
def test_compact_weights_agree_with_fp32_over_the_edit_session(backend):
    from tabd.predictor.bench.agreement import agreement

    states = list(edits())
    bf16 = LocalBackend(LocalSettings(engine="torch+native", threads=1, weights="bf16"))
    int8 = LocalBackend(LocalSettings(engine="torch+native", threads=1, weights="int8"))
    assert bf16.runner.native is not None and int8.runner.native is not None
    assert agreement(backend, bf16, states)["rate"] >= 0.99
    assert agreement(backend, int8, states)["rate"] >= 0.95  # measured 1.0 on the embedded model


@pytest.mark.parametrize("weights, per_weight", [("fp32", 4), ("bf16", 2), ("int8", 1)])
def test_the_weights_are_held_once_in_their_format(weights, per_weight, monkeypatch):
    from tabd.predictor.loading import loader
    from tabd.predictor.engine import model

    monkeypatch.setattr(model, "SMALL_BYTES", 0)  # as for any model over 64 MB (a small one keeps prefill copies too)
    b = LocalBackend(LocalSettings(engine="torch+native", threads=1, weights=weights))
    loaded, _, _ = loader.load(DEFAULT_MODEL_DIR, "cpu", fast=True)
    model.FastLlama(loaded, weights=weights, release=True)
    left = sum(t.numel() for t in loaded.parameters())
    assert left < 0.01 * b.parameters  # the loaded tensors were let go as they were copied (norms stay)
    held = b.runner.weight_bytes()
    assert per_weight * b.parameters * 0.95 < held < per_weight * b.parameters * 1.05 + 4 * b.parameters * 0.02
    assert b.weights_why.startswith(f"{weights} (asked for)")


def test_auto_weights_pick_by_size_and_say_so():
    from tabd.predictor.engine.weights import choose_format

    assert choose_format("auto", 12 << 20)[0] == "fp32"
    fmt, why = choose_format("auto", 2 << 30)
    assert fmt == "bf16" and "2048 MB" in why
    with pytest.raises(ValueError, match="unknown weight format 'fp16'"):
        choose_format("fp16", 1)


def test_the_plain_tensor_layout_used_off_the_cpu_runs_here_in_bf16():
    """On CUDA (bf16) the engine keeps plain [in, out] tensors and no native step; no GPU here, so that path runs
    on the CPU with a bf16 model and is checked against transformers' own forward."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tabd.predictor.engine.model import Dense, FastLlama

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=300, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    model = Qwen2ForCausalLM(cfg).eval().to(torch.bfloat16)
    fast = FastLlama(model)
    assert fast.native is None and isinstance(fast.layers[0][1], Dense) and fast.weights == "bfloat16"
    ids = torch.randint(0, 300, (40,)).tolist()
    cache = fast.new_cache(64)
    got = fast.forward_last(ids, cache)
    with torch.inference_mode():
        want = model(input_ids=torch.tensor([ids])).logits[0, -1]
    torch.testing.assert_close(got.float(), want.float(), rtol=0.05, atol=0.05)
    step = fast.forward_last([ids[0]], cache)  # a decode step on top of the cache
    assert step.shape == want.shape and cache.length == 41


# -- tabd bench preempt: a foreground request behind a prefilling prefetch, through LSP ------------------

def test_bench_preempt_drives_a_real_server_and_reports_the_wait_against_a_chunk():
    r = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "preempt", "--json", "--preempt-rounds", "1"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["preempt"]
    assert d["shape"] == "embedded" and d["chunk_tokens"] == 2048  # the embedded model's chunk: the whole prompt
    row = d["rounds"][0]
    assert row["cold_prefill_tokens"] > 1000  # document A's long prompt was prefilled cold
    assert d["prefetch"]["started"] >= 1  # A's answer started the prefetch B was asked behind
    assert row["b_queue_ms"] >= 0 and row["chunk_ms"] > 0
    assert row["queue_over_chunk"] == pytest.approx(row["b_queue_ms"] / row["chunk_ms"], abs=0.01)


def test_lookup_runs_on_one_thread_or_where_decode_is_bound_by_memory(backend):
    saved = backend.lookup, backend.memory_bound
    try:
        backend.lookup, backend.memory_bound = None, False  # the embedded model, unset: by the request's threads
        assert backend._lookup_now(1) and not backend._lookup_now(2)
        backend.memory_bound = True  # 0.5B and up: a pass of 8 costs about one of 1, at any thread count
        assert backend._lookup_now(2)
        backend.lookup = False  # set: always as set
        assert not backend._lookup_now(1)
    finally:
        backend.lookup, backend.memory_bound = saved


def test_lookup_drafts_what_followed_the_latest_earlier_occurrence():
    look = generate.Lookup([5, 6, 7, 8, 9, 1, 6, 7, 8, 2, 3], max_draft=7)
    look.k = 7
    for t in (5, 6, 7):
        look.add(t)
    assert look.draft(7) == [8, 9, 1, 6, 7, 8, 2]  # the 3-gram "5 6 7" seen at the start: what came after it
    look.add(99)
    assert look.draft(7) == []  # "7 99" and "6 7 99" were never seen
    look = generate.Lookup([1, 2, 3, 4, 9, 9, 9, 1, 2], max_draft=7)
    look.k = 7
    assert look.draft(2) == [3, 4]  # the latest (here the only) occurrence, cut to the limit
    assert generate.Lookup([1, 2, 0x110000, 1], max_draft=7).draft(7) == []  # an id past Unicode's range: no drafts
    # prefix-suffix-middle prompts: the decoded tokens follow the suffix and a marker in the prompt, so the
    # n-gram before the cursor is looked up in the text before the cursor, in the document's order
    pre, suf, mid = 90, 91, 92
    prompt = [pre, 1, 2, 3, 4, 1, 2, suf, 7, mid]
    look = generate.Lookup(prompt, max_draft=7, doc=[1, 2, 3, 4, 1, 2])
    look.k = 7
    assert look.draft(7) == [3, 4, 1, 2]  # "1 2" was followed by "3 4 1 2" before the cursor
    plain = generate.Lookup(prompt, max_draft=7)
    plain.k = 7
    assert plain.draft(7) == []  # "7 <mid>" (the prompt's own last tokens) was never seen


def method(name: int) -> list[int]:
    """A pattern's tokens: "def", "get_", NAME, "(self):", "return", "self", ".", "data.get('", NAME, "')"."""
    return [10, 11, name, 12, 13, 14, 15, 16, name, 17]


def test_lookup_drafts_as_far_as_the_two_latest_occurrences_agree():
    """Where the n-gram was seen twice, what followed both is drafted whole, whatever the adapted length says;
    where the two copies differ at once (a name that varies), one token; seen once, the adapted length."""
    three = [*method(1), *method(2), *method(3)]
    for k in (1, 2, 7):
        look = generate.Lookup([*three, 10, 11, 4, 12, 13], max_draft=7)
        look.k = k
        assert look.draft(7) == [14, 15, 16]  # "(self): return" -> "self . data.get('": both copies agree to there
        assert look.draft(2) == [14, 15]  # cut to the limit
    look = generate.Lookup([*three, 10, 11], max_draft=7)
    assert look.k == 2 and look.draft(7) == [3]  # after "def get_" came 2, then 3: one token (the latest) only
    look = generate.Lookup([*method(1), 99, 12, 13], max_draft=7)
    assert look.draft(7) == [14, 15]  # "(self): return" seen once: k = 2 tokens of what followed it
    look.feedback(2, 2)
    assert look.draft(7) == [14, 15, 16, 1]  # all agreed: k doubled


def test_lookup_stops_drafting_for_a_few_steps_after_two_rejected_passes_in_a_row():
    look = generate.Lookup([*method(1), 99, 12, 13], max_draft=7)
    look.feedback(2, 0)
    look.feedback(1, 1)
    look.feedback(2, 0)
    assert look.draft(7) != []  # rejected, accepted, rejected: not in a row
    look.feedback(1, 0)
    assert [look.draft(7) for _ in range(generate.Lookup.COOL_STEPS)] == [[]] * generate.Lookup.COOL_STEPS
    assert look.draft(7) != []  # then drafting again


@needs_native
@pytest.mark.parametrize("threads, weights", [(1, "fp32"), (1, "bf16"), (3, "int8"), (2, "bf16")])
def test_a_pass_of_up_to_8_tokens_gives_one_steps_bits_in_every_weight_format(threads, weights):
    """A verify pass (whole 64-column panel rows in 512-bit registers for 2-6 tokens where the CPU has them, two
    sweeps for 7-8) against one token a step, bit for bit, in each weight format, with a partial column panel
    (intermediate 200) and a q/k/v bias."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tabd.predictor.engine.model import FastLlama

    torch.manual_seed(1)
    cfg = Qwen2Config(vocab_size=300, hidden_size=128, intermediate_size=200, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=256)
    model = Qwen2ForCausalLM(cfg).eval()
    fast = FastLlama(model, weights=weights)
    assert fast.native is not None, fast.native_why
    ids = torch.randint(0, 300, (110,)).tolist()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for n in range(2, 9):
            a, b = fast.new_cache(256), fast.new_cache(256)
            generate.prefill(fast, ids[:100], a)
            generate.prefill(fast, ids[:100], b)
            one = torch.stack([fast.native.step(t, a)[1].clone() for t in ids[100 : 100 + n]])
            choices = fast.verify(ids[100 : 100 + n], b)
            assert torch.equal(fast.native.logits_buf[:n], one), (n, weights)
            assert [c for c, _ in choices] == torch.argmax(one, dim=-1).tolist()
            assert torch.equal(a.k[:, :, :a.length], b.k[:, :, :b.length]) and a.length == b.length
    finally:
        torch.set_num_threads(old_threads)


@needs_native
@pytest.mark.parametrize("weights", ["fp32", "int8"])
def test_the_native_greedy_choice_is_the_first_of_tied_maxima_as_torch_argmax(weights):
    """The argmax the native step computes (64 lanes at a time, then the first index of the maximum) against
    torch.argmax on its own logits, where the largest logit is tied across the vocabulary: lm_head rows that are
    copies of one vector (and zeros before them), at indices inside and past the 64-lane blocks."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from tabd.predictor.engine.model import FastLlama

    torch.manual_seed(2)
    cfg = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=64,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    v = torch.randn(64)
    with torch.no_grad():
        w = model.lm_head.weight
        w[:] = -v  # every row -v: the logit -h.v everywhere ...
        w[:70] = 0.0  # ... but zeros first ...
        w[[70, 150, 299]] = v  # ... and +h.v at three rows: the maximum, tied, at 70 or (h.v < 0) at 71
    fast = FastLlama(model, weights=weights)
    assert fast.native is not None, fast.native_why
    ties = set()
    for start in range(0, 40, 4):
        cache = fast.new_cache(64)
        generate.prefill(fast, list(range(start + 1, start + 9)), cache)
        best, logits = fast.native.step(start + 9, cache)
        top = logits.max()
        assert int((logits == top).sum()) >= 2  # tied
        assert best == int(torch.argmax(logits))  # the first of them
        ties.add(best)
    assert ties & {70, 71}


@needs_native
@pytest.mark.parametrize("min_joint", [0.0, 1e-3])
def test_teacher_forced_scoring_in_passes_of_8_gives_the_numbers_and_cache_of_one_token_a_pass(backend, min_joint):
    fast = backend.runner
    ids = prompt_ids(backend, 320)
    prompt, copy = ids[:300], ids[300:320]  # a "copy" of 20 tokens the model is asked to score
    out = []
    for batch in (False, True):
        cache = fast.new_cache(512)
        logits = generate.prefill(fast, prompt, cache)
        probs = generate.score_tokens(fast, logits, cache, copy, min_joint, batch=batch).probs
        out.append((probs, cache.length, cache.k[:, :, : cache.length].clone()))
    (p1, n1, k1), (p8, n8, k8) = out
    assert p8 == p1 and len(p1) >= 1  # the same probabilities, bit for bit
    assert n8 == n1 == 300 + len(p1) - 1 and torch.equal(k8, k1)  # the cache holds what one-a-pass fed, no more
