"""The model's runs for next edits (daemon/edits/): the probability it would write a text somewhere, and its answer
to a next-edit prompt. They share the completion model and its worker, not the completion pipeline."""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from tabd.cache.state import DocState
from tabd.daemon.edits.model_source import FormatWriter, Writer
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.jobs import queue
from tabd.daemon.runtime.loaded_model import Model
from tabd.daemon.runtime.request import RequestBuilder
from tabd.daemon.runtime.scheduler import FOREGROUND, Cancelled, Scheduler
from tabd.predictor.prompt.nes_formats import TABD, NesFormat, format_named
from tabd.predictor.types import GenSettings, Prediction, Query

logger = logging.getLogger(__name__)


def spelled_probability(pred: Prediction, text: str) -> float:
    """The joint probability of the model's tokens up to where its suggestion spells `text` (0 where it departs)."""
    wrote = pred.text
    if not wrote or not (wrote.startswith(text) or text.startswith(wrote)):
        return 0.0
    p = 1.0
    for end, prob in pred.confidence:
        p *= prob
        if end >= len(text):
            break
    return p


class EditRuns:
    def __init__(self, config: Config, model: Model, scheduler: Scheduler, requests: RequestBuilder) -> None:
        self.config = config
        self.model = model
        self.scheduler = scheduler
        self.requests = requests
        self._plain_refused = False  # --edit-format's warning, said once

    async def score(self, doc: str, prefix: str, suffix: str, text: str, background: bool) -> float:
        """The model's probability of writing `text` at a place other than the cursor (next-edit suggestions'
        gate): its greedy suggestion there, between `prefix` and `suffix`, as far as it spells `text`; 0 where it
        writes something else or cannot run."""
        if not await self.model.ready() or self.model.backend is None:
            return 0.0
        backend = self.model.backend
        state = DocState(len(prefix), prefix[-2 * self.config.prefix_chars:], suffix[:2 * self.config.suffix_chars])
        window, settings = self.requests.window_of(state), self.requests.settings_for(state)

        def run(should_stop: Callable[[], bool]) -> Prediction:
            return backend.predict(Query(window.prefix, window.suffix, settings, slot_id=f"{doc}#edit"), should_stop)

        job = queue(self.scheduler, run, 1 if background else FOREGROUND, "edit-score")
        try:
            pred: Prediction = await asyncio.wrap_future(job.future)
        except (Cancelled, Exception) as exc:  # a failed score holds the edit back: never shown on an error
            logger.info("edit score failed: %s", exc)
            return 0.0
        return spelled_probability(pred, text)

    def writer(self) -> Writer:
        """The model as a next-edit writer (daemon/edits/model_source.py): in tabd's own prompt format, or in the one
        --edit-format names (Sweep's, Zeta's), which the model source then builds its prompts in."""
        fmt = format_named(self.config.edit_format)
        return self.write_edit if fmt is TABD else FormatWriter(fmt, self.write_edit)

    async def write_edit(self, doc: str, prompt: str, budget: int, background: bool,
                         fmt: NesFormat = TABD) -> tuple[str, tuple[tuple[int, float], ...]] | None:
        """The model's answer to a next-edit prompt (predictor/prompt/edit_prompt.py, or `fmt`'s) as written, with its
        tokens' probabilities; None where it cannot run. Its own slot: the edit prompt's keys and values are kept for
        the next one (a chain's prompts share their head). A format of another model's goes to the engine as it is
        (a plain completion, no FIM suffix) with its stop strings; an answer that used the whole budget was cut
        before its end, and is none."""
        if not await self.model.ready() or self.model.backend is None:
            return None
        backend = self.model.backend
        if not backend.writes_edits:
            return None
        if fmt.plain and not backend.plain_prompts:
            if not self._plain_refused:
                self._plain_refused = True
                logger.warning("--edit-format %s needs --backend openai (an engine serving that model); the model "
                               "writes no edits here", fmt.name)
            return None
        settings = GenSettings(max_new_tokens=budget, lookup_min_p=0.0, known_names=False, raw=True, plain=fmt.plain,
                               stop=fmt.stops)

        def run(should_stop: Callable[[], bool]) -> Prediction:
            return backend.predict(Query(prompt, "", settings, slot_id=f"{doc}#nes", priority=int(background)), should_stop)

        job = queue(self.scheduler, run, 1 if background else FOREGROUND, "edit-write")
        try:
            pred: Prediction = await asyncio.wrap_future(job.future)
        except (Cancelled, Exception) as exc:  # no answer: no edit, never an error shown for a suggestion
            logger.info("edit prompt failed: %s", exc)
            return None
        if fmt.stops and pred.decode_tokens >= budget:
            return None  # stopped by the budget, not by the format's stop: the window it wrote is not whole
        return pred.text, pred.confidence
