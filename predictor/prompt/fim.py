"""The FIM formats, defined once: tabd's own special tokens and every family's markers.

Both the daemon's prompt templates (templates.py) and `tabd train` build their
token sequences from these definitions, so the shipped model is trained on
exactly the layout the daemon prompts with.

tabd's own layout, suffix first so that accepting a suggestion extends the
sequence (each piece tokenized on its own, as the daemon does):

    [context]  <tabd_suf> suffix <tabd_pre> prefix  -> middle <tabd_eot>

where the optional workspace context is a run of chunks, each written as
`# path\\n` (`// path`, `-- path`: the chunk's language's line comment) + its text + `\\n`, followed by `<tabd_eot>`: the separator the
model already knows from between files in its plain-text rows.

Families whose models were trained on repository context get their own tokens
(REPO_TOKENS): Qwen2.5-Coder reads `<|repo_name|>name\\n` then
`<|file_sep|>path\\ntext` per file; StarCoder2 `<file_sep>path\\ntext` per file
and a closing `<file_sep>`. Other families get the chunks as plain text.
"""
from __future__ import annotations

from typing import Sequence

from tabd.predictor.types import ContextChunk

EOT, PRE, SUF, MID, PAD = "<tabd_eot>", "<tabd_pre>", "<tabd_suf>", "<tabd_mid>", "<tabd_pad>"
SPECIAL_TOKENS = (EOT, PRE, SUF, MID, PAD)  # ids 0..4 in tabd's tokenizer, in this order

# family -> (prefix, suffix, middle, stops, layouts supported, preferred first)
FAMILIES: dict[str, tuple[str, str, str, tuple[str, ...], tuple[str, ...]]] = {
    "tabd": (PRE, SUF, MID, (EOT,), ("spm", "psm")),
    "qwen2.5-coder": ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", ("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>"), ("psm",)),
    "starcoder2": ("<fim_prefix>", "<fim_suffix>", "<fim_middle>", ("<|endoftext|>", "<file_sep>", "<fim_pad>"), ("spm", "psm")),
    "deepseek-coder": ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", ("<｜end▁of▁sentence｜>", "<|EOT|>"), ("psm",)),
    "codellama": ("▁<PRE>", "▁<SUF>", "▁<MID>", ("▁<EOT>", "</s>"), ("spm", "psm")),
}


# family -> (repository-name token, file-separator token); "" where the family has none
REPO_TOKENS: dict[str, tuple[str, str]] = {
    "qwen2.5-coder": ("<|repo_name|>", "<|file_sep|>"),
    "starcoder2": ("", "<file_sep>"),
}
REPO_NAME = "workspace"  # what `<|repo_name|>` is followed by: the daemon knows files, not repositories


def chunk_text(chunk: ContextChunk) -> str:
    """One context chunk as the model reads it: a path comment (in the chunk's language), then the text."""
    text = chunk.text if chunk.text.endswith("\n") else chunk.text + "\n"
    return f"{chunk.comment} {chunk.path}\n{text}"


def tabd_context_pieces(chunks: Sequence[ContextChunk]) -> list[tuple[str, bool]]:
    """(text, is_special) pieces of tabd's context block; empty without chunks (the current file's header has no
    place in it: the embedded model is trained without one)."""
    chunks = [c for c in chunks if not c.current]
    if not chunks:
        return []
    return [("".join(chunk_text(c) for c in chunks), False), (EOT, True)]


def repo_context_pieces(family: str, chunks: Sequence[ContextChunk]) -> list[tuple[str, bool]]:
    """(text, is_special) pieces of the context block for a family with its own repository tokens."""
    if not chunks:
        return []
    repo, sep = REPO_TOKENS[family]
    pieces: list[tuple[str, bool]] = [(repo, True), (REPO_NAME + "\n", False)] if repo else []
    current = [c for c in chunks if c.current][:1]
    for c in (c for c in chunks if not c.current):
        text = c.text if c.text.endswith("\n") else c.text + "\n"
        pieces += [(sep, True), (f"{c.path}\n{text}", False)]
    if current:  # the file being completed, headed with its path as the family's repository rows are
        pieces += [(sep, True), (f"{current[0].path}\n", False)]
    elif not repo:
        pieces.append((sep, True))  # StarCoder2: the file being completed follows a separator of its own
    return pieces


def plain_context_pieces(chunks: Sequence[ContextChunk]) -> list[tuple[str, bool]]:
    """The chunks as text, for families that know no repository tokens (no place for the current file's header)."""
    chunks = [c for c in chunks if not c.current]
    return [("".join(chunk_text(c) for c in chunks), False)] if chunks else []
