"""Training rows for `tabd train`: FIM samples in the daemon's own layout (some with workspace context before
them) and plain text, drawn by one seeded sampler so a resumed run sees the same rows."""
from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING

from tabd.predictor.prompt import pairs, prompt_ids
from tabd.predictor.prompt.edit_prompt import LineHunk, line_hunks
from tabd.predictor.training import edit_rows
from tabd.predictor.prompt.fim import EOT, MID, PAD, PRE, SUF
from tabd.predictor.prompt.templates import template_for
from tabd.predictor.training.data import Source, line_spans
from tabd.predictor.types import ContextChunk

if TYPE_CHECKING:
    from tabd.predictor.training.train import TrainConfig


class Rows:
    """Makes training rows from sources with one seeded sampler, so a resumed run sees the same rows."""

    def __init__(self, sources: list[Source], tok, cfg: TrainConfig, seed: int, edits: list[dict] | None = None):
        self.sources, self.tok, self.cfg = sources, tok, cfg
        self.edits = edits or []  # `tabd train edits` pairs: {"path", "old", "new", ...}
        self.hunks: dict[int, list[LineHunk]] = {}
        self.rng = random.Random(seed)
        self.weights = [len(s.text) for s in sources]  # cursors land uniformly over characters, not files
        self.by_group: dict[str, list[int]] = {}
        for i, s in enumerate(sources):
            self.by_group.setdefault(s.group, []).append(i)
        self.templates = {"spm": template_for("tabd", "spm"), "psm": template_for("tabd", "psm")}

    def encode(self, text: str) -> list[int]:
        return prompt_ids.encode(self.tok, text)  # the daemon's tokenization, so rows match its prompts

    def special(self, token: str) -> int:
        return prompt_ids.special(self.tok, token)[0]

    def row(self) -> list[int]:
        """seq_len + 1 tokens (inputs and shifted targets): a FIM sample first, then plain text."""
        n = self.cfg.seq_len + 1
        row: list[int] = []
        r, p_edit = self.rng.random(), self.cfg.p_edit if self.edits else 0.0
        if r < p_edit:
            row = self.edit_sample(n)
        elif (r - p_edit) / (1 - p_edit) < self.cfg.p_spm + self.cfg.p_psm:  # the draw rescaled: p_edit 0 keeps old rows
            row = self.fim_sample(self.rng.choices(range(len(self.sources)), self.weights)[0], n)
        if len(row) < n:
            row += self.plain(n - len(row))
        return row[:n]

    def fim_sample(self, index: int, budget: int) -> list[int]:
        cfg, rng, text = self.cfg, self.rng, self.sources[index].text
        start, end = pick_middle(text, rng)
        end += closers_after(text, end)  # as the daemon lays the prompt out: the middle writes them itself
        prefix = text[max(0, start - rng.randint(cfg.prefix_chars // 3, cfg.prefix_chars)):start]
        suffix = text[end:end + rng.randint(0, cfg.suffix_chars)]
        layout = "spm" if rng.random() < cfg.p_spm / (cfg.p_spm + cfg.p_psm) else "psm"
        template = self.templates[layout]
        chunks = []
        if rng.random() < cfg.p_context:
            needed = text[start:end] if rng.random() < cfg.p_context_needed else ""
            chunks = self.context_for(index, prefix, suffix, needed)
        head = prompt_ids.lay_out(self.tok, template.context_pieces(chunks))
        mid = self.encode(text[start:end])[: budget // 4]
        suf = self.encode(suffix)[: budget // 3]
        room = budget - len(head) - len(mid) - len(suf) - 5
        pre = self.encode(prefix)[-room:] if room > 0 else []
        slots = {prompt_ids.PREFIX_SLOT: pre, prompt_ids.SUFFIX_SLOT: suf}
        pieces = template.pieces(prompt_ids.PREFIX_SLOT, prompt_ids.SUFFIX_SLOT)
        return head + prompt_ids.lay_out(self.tok, pieces, slots) + mid + [self.special(EOT)]

    def edit_sample(self, budget: int, tries: int = 4) -> list[int]:
        """A next-edit row (edit_rows.py) from a random release pair; [] when a few draws make none that fits."""
        for _ in range(tries):
            i = self.rng.randrange(len(self.edits))
            pair = self.edits[i]
            if i not in self.hunks:
                self.hunks[i] = line_hunks(pair["old"], pair["new"])
            ex = edit_rows.example(pair["path"], pair["old"], pair["new"], self.rng, hunks=self.hunks[i])
            ids = edit_rows.tokens(ex, self.tok, budget, self.encode) if ex is not None else []
            if ids:
                return ids
        return []

    def context_for(self, index: int, prefix: str, suffix: str, needed: str = "") -> list[ContextChunk]:
        """Chunks of the same repository's other files, most alike the cursor's surroundings first.

        With `needed` (the middle to be predicted), a chunk that holds the middle's
        identifiers missing from the prefix scores first: rows where the context
        pays, so the model learns to copy from it (the daemon's own picks pay less
        often, and the rows without `needed` teach it so)."""
        others = [i for i in self.by_group.get(self.sources[index].group, []) if i != index]
        if not others:
            return []
        local = identifiers(prefix[-1500:] + suffix[:500])
        wanted = identifiers(needed) - identifiers(prefix)
        candidates = []
        for i in self.rng.sample(others, min(6, len(others))):
            src = self.sources[i]
            lines = src.text.splitlines(keepends=True)
            for a in range(0, len(lines), 32):
                chunk = "".join(lines[a:a + 32])
                if chunk.strip():
                    names = identifiers(chunk)
                    candidates.append(((len(wanted & names), similarity(local, names)), src.path, chunk, src.comment))
        candidates.sort(key=lambda c: c[0], reverse=True)
        chosen, used = [], 0
        for _, path, chunk, comment in candidates[:8]:  # headed in the chunk's own language, as the daemon does
            cost = len(chunk) // 3 + 8  # ~3 characters a token in Python
            if used + cost > self.cfg.context_tokens:
                continue
            chosen.append(ContextChunk(path, chunk, comment=comment))
            used += cost
        return chosen

    def plain(self, n: int) -> list[int]:
        """n tokens of plain text: a random file from a random line (or its start), then whole files."""
        out: list[int] = []
        text = self.rng.choices(self.sources, self.weights)[0].text
        starts = [s for s, _ in line_spans(text)]
        pos = 0 if self.rng.random() < 0.3 else self.rng.choice(starts)
        while len(out) < n:
            chunk = text[pos:pos + 6 * (n - len(out)) + 64]
            out += self.encode(chunk)
            pos += len(chunk)
            if pos >= len(text):
                out.append(self.special(EOT))
                text, pos = self.rng.choices(self.sources, self.weights)[0].text, 0
        return out[:n]

    def batch(self, rows: int):
        import torch

        data = torch.tensor([self.row() for _ in range(rows)], dtype=torch.long)
        return data[:, :-1], self.targets(data[:, 1:])

    def targets(self, y):
        """The next tokens to learn, the FIM markers left out (ignore_index): the daemon writes every marker
        itself, and a model taught to predict them (a `<tabd_pre>` follows the suffix in SPM rows, a
        `<tabd_suf>` the prefix in PSM ones) began 9% of its suggestions with one where the cursor sits in
        an indentation it has rarely seen cut (35 of 400 probes on third-party files, phases 6 and 7)."""
        import torch

        markers = torch.tensor([self.special(t) for t in (PRE, SUF, MID, PAD)])
        return y.masked_fill(torch.isin(y, markers), IGNORE)


IGNORE = -100  # F.cross_entropy's ignore_index: a target that teaches nothing
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def identifiers(text: str) -> set[str]:
    return set(_IDENT.findall(text))


def similarity(a: set[str], b: set[str]) -> float:
    return len(a & b) / max(1, len(a | b))


def closers_after(text: str, end: int) -> int:
    """The closers right after a middle on its line, which the daemon's prompt window leaves out of the suffix
    (predictor/prompt/pairs.py): a row ends its middle after them, so the model learns to write them, as it is asked to."""
    span = pairs.closer_span(text[end:end + 64])
    return span.end if span.same_line else 0


def pick_middle(text: str, rng: random.Random) -> tuple[int, int]:
    """A span that looks like an editor completion: mostly the rest of a line, sometimes whole lines."""
    lines = [s for s in line_spans(text) if text[s[0]:s[1]].strip()]
    if not lines:
        return len(text), len(text)
    r = rng.random()
    if r < 0.6:  # from a point inside a line to its end (not the newline)
        start, end = rng.choice(lines)
        indent = start + len(text[start:end]) - len(text[start:end].lstrip())
        u = rng.random()
        if u < 0.22:
            cut = indent  # the cursor after auto-indent
        elif u < 0.27 and indent - start > 1:
            cut = rng.randint(start + 1, indent - 1)  # inside the indentation: a dedent, or an editor indenting less
        elif u < 0.32:
            cut = end  # the line is complete: the right answer is to stop
        else:
            cut = rng.randint(indent, end - 1)
        return cut, end
    if r < 0.85:  # one or a few whole lines: a statement or a block body
        i = rng.randrange(len(lines))
        j = min(len(lines) - 1, i + rng.choice([0, 0, 0, 1, 2, 3, 5]))
        return lines[i][0], lines[j][1]
    start = rng.randrange(len(text))  # any span of characters
    return start, min(len(text), start + rng.randint(1, 200))
