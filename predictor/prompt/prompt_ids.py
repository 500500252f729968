"""Template pieces as token ids, defined once: the daemon's prompts (local.py) and `tabd train`'s rows both use it.

Each piece is tokenized on its own, so typing or accepting at the cursor only
appends to the sequence, and the shipped model is trained on exactly the ids the
daemon prompts with; a special piece is its token's id. (prompt_text.py is the
same layout as text, for remote servers.)
"""
from __future__ import annotations

import bisect
from typing import Any, Iterable, Mapping

PREFIX_SLOT, SUFFIX_SLOT = "\0P", "\0S"  # placeholders passed to FimTemplate.pieces for ids tokenized beforehand


def encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False) if text else []


def special(tokenizer: Any, token: str) -> list[int]:
    """The id of a special token (its text's ids for a tokenizer that does not have it)."""
    tid = tokenizer.convert_tokens_to_ids(token)
    return [tid] if isinstance(tid, int) else encode(tokenizer, token)


def lay_out(tokenizer: Any, pieces: Iterable[tuple[str, bool]], slots: Mapping[str, list[int]] | None = None) -> list[int]:
    """Token ids of (text, is_special) pieces; a plain piece named in `slots` takes those ids as they are."""
    ids: list[int] = []
    for text, is_special in pieces:
        if not text:
            continue
        if is_special:
            ids += special(tokenizer, text)
        elif slots is not None and text in slots:
            ids += slots[text]
        else:
            ids += encode(tokenizer, text)
    return ids


class FirstTokens:
    """The ids of the tokens whose text starts with a given text (token healing: the prefix's last token is
    backed off, and the model's first token must start with its text), ascending, `stop_ids` left out.

    Found by bisecting the vocabulary sorted by text, where those tokens are one run: a scan of the whole
    vocabulary cost ~3 ms a request on the embedded model's 8k tokens (twice: the decode and the copy's
    verification), more than a mid-line request's decode; Qwen's vocabulary is 150k."""

    def __init__(self, vocab: list[str], stop_ids: Iterable[int] = ()) -> None:
        self.entries = sorted((t, i) for i, t in enumerate(vocab))
        self.stop_ids = set(stop_ids)

    def starting_with(self, text: str) -> list[int]:
        out = []
        for j in range(bisect.bisect_left(self.entries, (text, -1)), len(self.entries)):
            token_text, i = self.entries[j]
            if not token_text.startswith(text):
                break
            if i not in self.stop_ids:
                out.append(i)
        return sorted(out)  # the order a scan gives: the allowed logits are summed in it
