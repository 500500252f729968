"""FIM prompts as strings, for engines that take text: build one, and parse one back.

A remote engine (llama.cpp, vLLM, `tabd serve-model`) tokenizes the prompt
itself and reads tokenizer-special tokens written as text ("<tabd_suf>") as
the special tokens, so the string carries the same layout as the token ids the
local backend builds. `tabd serve-model` parses the string back into
(prefix, suffix) so its engine runs exactly what the local backend would.
"""
from __future__ import annotations

import re

from typing import Sequence

from tabd.predictor.prompt.fim import FAMILIES, REPO_NAME, REPO_TOKENS
from tabd.predictor.prompt.templates import FimTemplate, template_for
from tabd.predictor.types import ContextChunk

_P, _S = "\0P", "\0S"


def fim_prompt(template: FimTemplate, prefix: str, suffix: str, context: Sequence[ContextChunk] = ()) -> str:
    """The prompt string for (prefix, suffix) laid out by `template`, workspace context first."""
    return "".join(text for text, _ in template.context_pieces(context) + template.pieces(prefix, suffix))


def split_context(template: FimTemplate, prompt: str) -> tuple[list[ContextChunk], str]:
    """(context chunks, the FIM prompt after them); ([], prompt) when the prompt has no context block.

    The chunks come back as few as lay out the same text: the model reads the
    same string, so the same tokens, whatever the boundaries between chunks were.
    """
    first = next((text for text, special in template.pieces(_P, _S) if special and text), "")
    at = prompt.find(first) if first else -1
    if at <= 0:
        return [], prompt
    head, rest = prompt[:at], prompt[at:]
    chunks = _parse_head(template, head)
    if not chunks or "".join(t for t, _ in template.context_pieces(chunks)) != head:
        return [], prompt
    return chunks, rest


COMMENT_LEADERS = ("#", "//", "--")  # the path comments context chunks are headed with (predictor/prompt/fim.py)


def _one_chunk(text: str) -> list[ContextChunk]:
    """`# path\\n` (or `// path`, `-- path`) + text as one chunk."""
    leader = next((c for c in COMMENT_LEADERS if text.startswith(c + " ")), None)
    if leader is None or "\n" not in text:
        return []
    line, _, body = text.partition("\n")
    return [ContextChunk(line[len(leader) + 1:], body, comment=leader)]


def _parse_head(template: FimTemplate, head: str) -> list[ContextChunk]:
    if template.family == "tabd":
        eot = template.stop_toks[0]
        return _one_chunk(head[: -len(eot)]) if head.endswith(eot) else []
    if template.family not in REPO_TOKENS:
        return _one_chunk(head)
    repo, sep = REPO_TOKENS[template.family]
    lead = f"{repo}{REPO_NAME}\n" if repo else ""
    if not head.startswith(lead + sep):
        return []
    parts = head[len(lead) + len(sep):].split(sep)
    if not repo and parts and parts[-1] == "":
        parts.pop()
    chunks = []
    for i, part in enumerate(parts):
        path, nl, text = part.partition("\n")
        if not nl:
            return []
        # the last, with no text: the current file's header (ContextChunk.current)
        chunks.append(ContextChunk(path, "", current=True) if i == len(parts) - 1 and not text else ContextChunk(path, text))
    return chunks


def parse_fim_prompt(template: FimTemplate, prompt: str) -> tuple[str, str] | None:
    """(prefix, suffix) if `prompt` has the template's layout, else None."""
    if template.layout == "plain":
        return prompt, ""
    parts: list[str] = []
    pieces = template.pieces(_P, _S)
    last_var = max(i for i, (text, special) in enumerate(pieces) if not special)
    for i, (text, special) in enumerate(pieces):
        if special:
            parts.append(re.escape(text))
        else:
            name = "prefix" if text == _P else "suffix"
            parts.append(f"(?P<{name}>.*)" if i == last_var else f"(?P<{name}>.*?)")
    match = re.fullmatch("".join(parts), prompt, re.DOTALL)
    if match is None:
        return None
    return match.group("prefix"), match.group("suffix")


def guess_template(model_name: str) -> FimTemplate | None:
    """The FIM template a model's name suggests (its family's preferred layout), or None."""
    name = model_name.lower().replace("_", "-")
    hints = [
        ("tabd", "tabd"),
        ("qwen2.5-coder", "qwen2.5-coder"),
        ("qwen2.5coder", "qwen2.5-coder"),
        ("qwen3-coder", "qwen2.5-coder"),
        ("starcoder", "starcoder2"),
        ("deepseek-coder", "deepseek-coder"),
        ("codellama", "codellama"),
        ("code-llama", "codellama"),
    ]
    for hint, family in hints:
        if hint in name and family in FAMILIES:
            return template_for(family)
    return None
