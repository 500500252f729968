"""FIM prompt templates, chosen from the tokenizer's special tokens.

A template lays out (prefix, suffix) as token pieces. In a suffix-first layout
("spm") the prefix is the last piece and the model continues it directly, so
accepting a suggestion extends the token sequence instead of changing it: the
KV cache kept from the last request already covers the new prompt.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from tabd.predictor.prompt.fim import FAMILIES, REPO_TOKENS, plain_context_pieces, repo_context_pieces, tabd_context_pieces
from tabd.predictor.types import ContextChunk


@dataclass(frozen=True)
class FimTemplate:
    family: str
    layout: str  # "spm": suffix first, prefix runs into the middle; "psm": prefix, suffix, middle; "plain": prefix only
    prefix_tok: str = ""
    suffix_tok: str = ""
    middle_tok: str = ""
    stop_toks: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.family}-{self.layout}"

    def pieces(self, prefix: str, suffix: str) -> list[tuple[str, bool]]:
        """(text, is_special) pieces in prompt order."""
        p, s, m = (self.prefix_tok, True), (self.suffix_tok, True), (self.middle_tok, True)
        if self.layout == "plain":
            return [(prefix, False)]
        if self.layout == "spm":
            if self.family == "tabd":
                return [s, (suffix, False), p, (prefix, False)]
            # StarCoder / CodeLlama SPM: <PRE><SUF>suffix<MID>prefix, middle continues the prefix
            return [p, s, (suffix, False), m, (prefix, False)]
        return [p, (prefix, False), s, (suffix, False), m]

    def context_pieces(self, chunks: Sequence[ContextChunk]) -> list[tuple[str, bool]]:
        """Pieces that put workspace context before `pieces()`; empty without chunks."""
        if self.family == "tabd":
            return tabd_context_pieces(chunks)
        if self.family in REPO_TOKENS:
            return repo_context_pieces(self.family, chunks)
        return plain_context_pieces(chunks)


def _deepseek_pieces(prefix: str, suffix: str) -> list[tuple[str, bool]]:
    begin, hole, end = FAMILIES["deepseek-coder"][:3]
    return [(begin, True), (prefix, False), (hole, True), (suffix, False), (end, True)]


def template_for(family: str, layout: str | None = None) -> FimTemplate:
    if family == "plain":
        return FimTemplate("plain", "plain")
    if family not in FAMILIES:
        raise ValueError(f"unknown FIM family {family!r}; known: {', '.join(sorted(FAMILIES))}, plain")
    pre, suf, mid, stops, layouts = FAMILIES[family]
    layout = layout or layouts[0]
    if layout not in layouts:
        raise ValueError(f"{family} supports layouts {', '.join(layouts)}, not {layout!r}")
    if family == "deepseek-coder":
        return DeepSeekTemplate(family, layout, pre, suf, mid, stops)
    return FimTemplate(family, layout, pre, suf, mid, stops)


class DeepSeekTemplate(FimTemplate):
    def pieces(self, prefix: str, suffix: str) -> list[tuple[str, bool]]:
        return _deepseek_pieces(prefix, suffix)


def detect_family(special_tokens: set[str]) -> str:
    """The FIM family whose three markers are all special tokens of this tokenizer, else "plain"."""
    for family, (pre, suf, mid, _, _) in FAMILIES.items():
        markers = {pre, suf, mid}
        if family == "codellama":
            markers = {t.lstrip("▁") for t in markers}
            if markers <= {t.lstrip("▁") for t in special_tokens}:
                return family
        elif markers <= special_tokens:
            return family
    return "plain"
