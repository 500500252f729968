"""FIM prompts as strings, for engines that take text: build one, and parse one back.

A remote engine (llama.cpp, vLLM, `tabd serve-model`) tokenizes the prompt
itself and reads tokenizer-special tokens written as text ("<tabd_suf>") as
the special tokens, so the string carries the same layout as the token ids the
local backend builds. `tabd serve-model` parses the string back into
(prefix, suffix) so its engine runs exactly what the local backend would.
"""
from __future__ import annotations

import re

from tabd.predictor.templates import FAMILIES, FimTemplate, template_for

_P, _S = "\0P", "\0S"


def fim_prompt(template: FimTemplate, prefix: str, suffix: str) -> str:
    """The prompt string for (prefix, suffix) laid out by `template`."""
    return "".join(text for text, _ in template.pieces(prefix, suffix))


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
