"""The file's language in the prompt where the FIM family has a place for it: a real `tabd serve` in front of a real
HTTP engine on 127.0.0.1 (tests/support/stub_model.py) that keeps every prompt. A Qwen2.5-Coder engine reads the file
being completed headed `<|file_sep|>path` (the repository layout it was trained on), so a TypeScript file says so by
its extension; tabd's own layout has no such place and its prompts do not change."""
from __future__ import annotations

import asyncio
import os
import sys

import pytest

from support.stub_model import stub_model
from tabd.lsp.client import Client

TS = "export function total(items: number[]): number {\n  let sum = 0\n  for (const x of items) {\n    sum += x\n  }\n  "


async def prompts_for(url: str, fim: str, tmp_path) -> list[str]:
    client = Client("test-language-header")
    await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url", url, "--fim", fim,
                        "--debounce-ms", "0", "--no-warmup"], env=dict(os.environ))
    try:
        await client.initialize(root_uri=(tmp_path / "w").as_uri())
        uri = (tmp_path / "w" / "src" / "total.ts").as_uri()
        client.open(uri, "typescript", 1, TS)
        future = client.inline_completion(uri, {"line": 5, "character": 2}, invoked=True)
        result = await asyncio.wait_for(asyncio.wrap_future(future), 60)
        assert result["items"], result
        await asyncio.wait_for(client.shutdown(), 30)
    finally:
        await client.stop()
    return []


@pytest.mark.asyncio
@pytest.mark.parametrize("fim, header", [("qwen2.5-coder", "<|file_sep|>src/total.ts\n<|fim_prefix|>"),
                                         ("tabd", None)])
async def test_the_engine_reads_which_file_and_so_which_language_it_completes(tmp_path, fim, header):
    with stub_model("answer") as (engine, url):
        engine.answer = "return sum"
        await prompts_for(url, fim, tmp_path)
        prompts = [b["prompt"] for b in engine.bodies if "prompt" in b]
    assert prompts
    if header is None:
        assert all("total.ts" not in p for p in prompts), prompts[0]
    else:
        assert all(header in p for p in prompts), prompts[0]
        assert all(p.startswith("<|repo_name|>workspace\n") for p in prompts)
