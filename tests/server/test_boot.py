"""The torch-free runner (predictor/engine/boot.py): the fast engine's weights and tokens without torch, and a
daemon whose first answer comes before torch is imported (read from tabd/stats and the log, not a clock)."""
from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import pytest_lsp
import torch
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from support.fixture_model import MODEL_DIR, SUGGESTION
from support.lspclient import init_params, inline, open_doc, stats
from tabd.daemon.runtime import handover
from tabd.predictor.engine import boot, native
from tabd.predictor.loading.loader import DEFAULT_MODEL_DIR
from tabd.predictor.backends.local import LocalBackend
from tabd.predictor.backends.backend_settings import LocalSettings
from tabd.predictor.types import GenSettings, ModelLoadError, Query

from support.predictor_cases import CODE, edits, same_tokens_over_edits

LIB, WHY = native.load()
needs_native = pytest.mark.skipif(LIB is None, reason=f"no native build here: {WHY}")


def _bits(t) -> np.ndarray:
    """A torch tensor's bytes as numpy (bf16 has no numpy dtype: its bits)."""
    t = t.contiguous()
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().view(np.uint8)


@needs_native
@pytest.mark.parametrize("weights", ["fp32", "bf16", "int8"])
def test_the_weights_are_packed_as_the_fast_engine_packs_them(weights):
    ours = LocalBackend(LocalSettings(engine="torch-free", weights=weights, threads=1)).runner
    fast = LocalBackend(LocalSettings(engine="torch+native", weights=weights, threads=1)).runner
    assert ours.weights == fast.weights == weights
    for a, b in zip(ours.layers, fast.layers):
        for i in (1, 3, 5, 6):  # qkv, o, gate_up, down: the panels and their int8 scales, byte for byte
            assert np.array_equal(a[i].data.view(np.uint8), _bits(b[i].data))
            assert (a[i].scale is None) == (b[i].scale is None)
            if a[i].scale is not None:
                assert np.array_equal(a[i].scale, b[i].scale.numpy())
        for i in (0, 4):
            assert np.array_equal(a[i], b[i].numpy())
    assert np.array_equal(ours.embed_rows.data.view(np.uint8), _bits(fast.embed_rows.data))
    # the rotary tables as transformers computes them (fp32): numpy's cos/sin may differ in the last bit
    np.testing.assert_allclose(ours.cos, fast.cos.numpy(), rtol=0, atol=2e-6)
    np.testing.assert_allclose(ours.sin, fast.sin.numpy(), rtol=0, atol=2e-6)


@needs_native
@pytest.mark.parametrize("weights", ["fp32", "int8"])
def test_the_torch_free_and_fast_engines_suggest_the_same_tokens_over_an_edit_session(weights):
    ours = LocalBackend(LocalSettings(engine="torch-free", weights=weights, threads=1))
    fast = LocalBackend(LocalSettings(engine="torch+native", weights=weights, threads=1))
    assert ours.engine_name == "torch-free" and fast.engine_name == "torch+native"
    settings = GenSettings(max_new_tokens=24)
    for a, b in same_tokens_over_edits(ours, fast, settings):
        assert a.text == b.text and a.reused_tokens == b.reused_tokens and a.confidence == b.confidence
    # a whole cold prompt of ~1k tokens through both: the torch-free prefill runs it in native pieces
    prefix = (CODE * 8)[-3000:]
    a, b = ours.predict(Query(prefix, "", settings, slot_id="cold")), fast.predict(Query(prefix, "", settings, slot_id="cold"))
    assert a.prefill_tokens > 500 and ours.last_tokens == fast.last_tokens


@needs_native
def test_the_fast_engine_takes_over_mid_session_with_the_same_tokens_and_one_copy_of_the_weights():
    ours = LocalBackend(LocalSettings(engine="auto", threads=1))
    fast = LocalBackend(LocalSettings(engine="torch+native", threads=1))
    assert ours.engine_name == "torch-free" and ours.can_hand_over() and not fast.can_hand_over()
    settings = GenSettings(max_new_tokens=24)
    session = list(edits())
    for i, (prefix, suffix) in enumerate(session):
        if i == len(session) // 2:
            store = ours.runner
            ours.hand_over(ours.prepare_hand_over())
            taken = ours.runner
            assert ours.engine_name == "torch+native" and taken.native is not None and not ours.can_hand_over()
            for a, b in zip(store.layers, taken.layers):  # views of the same panels: the weights are held once
                assert all(b[i].data.data_ptr() == a[i].data.ctypes.data for i in (1, 3, 5, 6))
            assert taken.embed_rows.data.data_ptr() == store.embed_rows.data.ctypes.data
            assert taken.native.lm_panels.data_ptr() == store.lm_panels.ctypes.data
        a = ours.predict(Query(prefix, suffix, settings, slot_id="d"))
        b = fast.predict(Query(prefix, suffix, settings, slot_id="d"))
        assert a.engine == ("torch-free" if i < len(session) // 2 else "torch+native")
        # the same tokens, and the documents' KV carried over: as much of each prompt reused as the fast engine
        assert ours.last_tokens == fast.last_tokens and a.text == b.text and a.reused_tokens == b.reused_tokens


@needs_native
def test_a_prefill_piece_gives_the_last_logits_and_the_cache_of_a_full_step():
    backend = LocalBackend(LocalSettings(engine="torch-free", threads=1))
    runner, ids = backend.runner, backend.tokenizer.encode(CODE)[:13]
    a, b = runner.new_cache(64), runner.new_cache(64)
    runner.native.steps(ids[:5], a)
    want = runner.native.steps(ids[5:13], a)[-1].copy()
    runner.native.prefill(ids[:5], b)
    got = runner.native.prefill(ids[5:13], b).copy()
    assert np.array_equal(got, want) and runner.native.best[0] == int(want.argmax())  # bit for bit: rows are independent
    assert a.length == b.length == 13 and np.array_equal(a.k[:, :, :13], b.k[:, :, :13])
    assert np.array_equal(a.v[:, :, :13], b.v[:, :, :13])


@needs_native
@pytest.mark.parametrize("stored", ["float32", "bfloat16"])
def test_a_qwen2_checkpoint_with_biases_in_fp32_or_bf16_is_served_torch_free_with_the_fast_engine_tokens(tmp_path,
                                                                                                          stored):
    from support.qwen2 import qwen2_dir as _qwen2_dir

    d = _qwen2_dir(tmp_path)
    if stored == "bfloat16":  # most published checkpoints: numpy has no bf16, the reader widens its bits
        from safetensors.torch import load_file, save_file

        path = next(d.glob("*.safetensors"))
        save_file({k: v.to(torch.bfloat16) for k, v in load_file(str(path)).items()}, str(path), {"format": "pt"})
    ours = LocalBackend(LocalSettings(str(d), engine="torch-free", threads=1))
    fast = LocalBackend(LocalSettings(str(d), engine="torch+native", threads=1))
    assert ours.runner.layers[0][2] is not None and ours.runner.lm_rows is not ours.runner.embed_rows
    ids = fast.tokenizer.encode(CODE, add_special_tokens=False)[:300]
    got = ours.runner.forward_last(ids, ours.runner.new_cache(len(ids)))  # a random model: compare the logits too
    want = fast.runner.forward_last(ids, fast.runner.new_cache(len(ids)))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)
    settings = GenSettings(max_new_tokens=12)
    same_tokens_over_edits(ours, fast, settings, 6)


def test_a_file_it_cannot_read_goes_to_torchs_loader_with_its_clear_error(tmp_path):
    import shutil

    d = tmp_path / "m"
    shutil.copytree(DEFAULT_MODEL_DIR, d)
    (d / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ModelLoadError, match="cannot load the model"):
        LocalBackend(LocalSettings(str(d), engine="auto", threads=1))
    with pytest.raises(ModelLoadError, match="the torch-free engine cannot serve .*not a safetensors file"):
        LocalBackend(LocalSettings(str(d), engine="torch-free", threads=1))


def test_a_model_the_native_step_cannot_run_loads_through_torch_and_says_why(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel
    import shutil

    d = tmp_path / "gpt2"
    GPT2LMHeadModel(GPT2Config(vocab_size=8192, n_positions=256, n_embd=64, n_layer=1, n_head=2)).save_pretrained(d)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(DEFAULT_MODEL_DIR / name, d / name)
    backend = LocalBackend(LocalSettings(str(d), engine="auto", threads=1))
    assert backend.engine_name == "transformers" and "gpt2" in backend.engine_why and backend.engine_why.startswith("torch")
    with pytest.raises(ModelLoadError, match="the torch-free engine cannot serve .*gpt2"):
        LocalBackend(LocalSettings(str(d), engine="torch-free", threads=1))


def test_no_gpu_check_imports_torch_and_a_gpu_device_goes_to_torch():
    assert boot.why_not(DEFAULT_MODEL_DIR, "cuda").startswith("device cuda")
    assert boot.why_not(DEFAULT_MODEL_DIR, "auto") in ("", *(
        [] if not boot.gpu_present() else ["a GPU may be present (auto device): torch decides"]))


# -- a real server ---------------------------------------------------------------------------------------

URI = "file:///w/boot.py"
LOG = Path(tempfile.gettempdir()) / f"tabd-boot-log-{os.getpid()}.jsonl"
NO_CC_CACHE = Path(tempfile.gettempdir()) / f"tabd-boot-nocc-{os.getpid()}"


def serve(model: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tabd.daemon", "serve", "--model", model, "--min-confidence", "0", *extra]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=serve(str(MODEL_DIR), "--log", str(LOG))))
async def fixture_client(lsp_client: LanguageClient, fixture_model):
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(
    server_command=serve(str(MODEL_DIR)),
    server_env={**os.environ, "TABD_HAND_OVER_HOLD_S": "600"}))  # held while a suggestion shows, until dismissed
async def held_client(lsp_client: LanguageClient, fixture_model):
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=serve(str(DEFAULT_MODEL_DIR))))
async def shipped_client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(
    server_command=serve(str(DEFAULT_MODEL_DIR)),
    server_env={**os.environ, "CC": "/nonexistent/cc", "TABD_CACHE": str(NO_CC_CACHE)}))
async def no_cc_client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


async def wait_for(client, predicate, timeout: float = 120.0) -> dict:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        s = await stats(client)
        if predicate(s) or asyncio.get_running_loop().time() > deadline:
            return s
        await asyncio.sleep(0.1)


@needs_native
async def test_a_fresh_server_answers_before_torch_is_imported_then_hands_over(fixture_client: LanguageClient):
    text = "def f(items):\n    return items\n\n\ndef g(items):\n    return items"
    open_doc(fixture_client, URI, text)
    result = await inline(fixture_client, URI, 1, len("    return items"))
    assert result.items and result.items[0].insert_text == SUGGESTION  # the model's own answer, written natively
    s = await stats(fixture_client)
    # counted when computed, not when asked: the hand-over may import torch any time after this answer
    assert s["served_by"] == {"torch-free": 1} and s["torch_free_answers"] == 1, s
    assert s["engine_why"].startswith("torch-free")
    # while the user keeps asking (cache hits too), torch's import (which holds the GIL) waits: past IDLE_S in all
    for _ in range(5):
        await asyncio.sleep(handover.IDLE_S / 3)
        again = await inline(fixture_client, URI, 1, len("    return items"))
        assert again.items and again.items[0].insert_text == SUGGESTION
    s = await stats(fixture_client)
    assert s["hand_over"]["state"] == "waiting" and s["sources"]["cache"] >= 5, s
    # once the user dismisses it and pauses, the fast engine takes over, over the same weights and KV
    await fixture_client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="tabd.dismiss", arguments=again.items[0].command.arguments))
    s = await wait_for(fixture_client, lambda s: s["hand_over"]["state"] in ("done", "failed"))
    assert s["hand_over"]["state"] == "done" and s["engine"] == "torch+native" and s["torch_loaded"] is True, s
    # nothing showed, so the import never waited; and no collection ran among torch's objects while it imported
    assert s["hand_over"]["imports_held"] == 0 and s["hand_over"]["collections_while_importing"] == 0, s
    assert s["engine_why"].startswith("torch+native (took over")
    result = await inline(fixture_client, URI, 5, len("    return items"))
    assert result.items and result.items[0].insert_text == SUGGESTION
    s = await stats(fixture_client)
    assert s["served_by"] == {"torch-free": 1, "torch+native": 1} and s["torch_free_answers"] == 1, s
    events = [json.loads(line) for line in LOG.read_text().splitlines()]
    model = [e for e in events if e["event"] == "completion" and e["origin"] == "model"]
    assert [(e["engine"], e["torch_loaded"]) for e in model] == [("torch-free", False), ("torch+native", True)]
    assert model[1]["reused_tokens"] > 0  # the document's KV, computed natively, carried over to the fast engine


@needs_native
async def test_the_hand_over_imports_torch_only_while_no_suggestion_shows(held_client: LanguageClient):
    """torch's import holds the GIL for tens of ms per module: while a suggestion shows (a Tab may come), the
    import waits between modules, cache hits are answered from memory meanwhile, and a dismissal lets it finish."""
    text = "def f(items):\n    return items\n\n\ndef g(items):\n    return items"
    open_doc(held_client, URI, text)
    shown = await inline(held_client, URI, 1, len("    return items"))
    assert shown.items and shown.items[0].insert_text == SUGGESTION
    # the user pauses with the suggestion on screen: the hand-over starts, and its import waits at a module
    s = await wait_for(held_client, lambda s: s["hand_over"]["holding"] or s["hand_over"]["state"] == "done", 90)
    assert s["hand_over"]["state"] == "preparing" and s["hand_over"]["holding"], s
    assert s["hand_over"]["imports_held"] == 1 and s["engine"] == "torch-free", s
    # what it has imported so far is frozen out of the collector's sight, which runs while the import waits
    freezes = s["gc"]["freezes"]
    assert s["gc"]["enabled"] is True and freezes == 2, s["gc"]  # 1: after the model load
    # a Tab now is answered from memory, by the LSP thread, while the import waits
    again = await inline(held_client, URI, 1, len("    return items"))
    assert again.items and again.items[0].insert_text == SUGGESTION
    s = await stats(held_client)
    assert s["last"]["source"] == "cache" and s["hand_over"]["state"] == "preparing" and s["engine"] == "torch-free", s
    # the user dismisses it: nothing shows, the import goes on and the fast engine takes over
    await held_client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="tabd.dismiss", arguments=again.items[0].command.arguments))
    s = await wait_for(held_client, lambda s: s["hand_over"]["state"] in ("done", "failed"))
    assert s["hand_over"]["state"] == "done" and s["engine"] == "torch+native" and not s["hand_over"]["holding"], s
    assert s["gc"]["enabled"] is True and s["gc"]["freezes"] == freezes + 1, s["gc"]  # back on, torch frozen out of it
    assert s["hand_over"]["collections_while_importing"] == 0, s["hand_over"]  # none held the GIL among its objects
    result = await inline(held_client, URI, 5, len("    return items"))
    assert result.items and result.items[0].insert_text == SUGGESTION
    s = await stats(held_client)
    assert s["served_by"] == {"torch-free": 1, "torch+native": 1}, s
    assert s["nice"]["hand_over"] > s["nice"]["lsp"], s["nice"]  # it ran below the LSP thread


@needs_native
async def test_the_shipped_model_is_served_torch_free(shipped_client: LanguageClient):
    open_doc(shipped_client, URI, CODE)
    lines = CODE.split("\n")
    await inline(shipped_client, URI, len(lines) - 1, len(lines[-1]))
    s = await stats(shipped_client)
    assert s["requests_to_model"]["finished"] >= 1 and s["error"] is None
    assert s["served_by"] == {"torch-free": 1} and s["torch_free_answers"] == 1, s


async def test_without_a_compiler_the_server_loads_through_torch_and_says_why(no_cc_client: LanguageClient):
    open_doc(no_cc_client, URI, CODE)
    lines = CODE.split("\n")
    await inline(no_cc_client, URI, len(lines) - 1, len(lines[-1]))
    s = await stats(no_cc_client)
    assert s["engine"] == "torch" and s["torch_loaded"] is True and s["error"] is None
    assert s["hand_over"] == {"state": "off"} and s["served_by"] == {"torch": 1} and s["torch_free_answers"] == 0
    assert "no native build" in s["engine_why"] and "/nonexistent/cc" in s["engine_why"], s["engine_why"]


def test_bench_start_reports_which_engine_answered_first(fixture_model):
    import subprocess

    r = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "start", "--start-rounds", "1", "--json",
                        "--model", fixture_model], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    start = json.loads(r.stdout)["start"]
    want = "torch-free" if LIB is not None else "torch"
    assert start["served_by"] == [{want: start["requests_until_first"][0]}]
    assert start["torch_free"] is (LIB is not None)
