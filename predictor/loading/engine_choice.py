"""The runner factory: which engine serves a model here, and why, returned as data (EngineChoice).

Engines by name (predictor/loading/engine_names.py): torch-free where boot.py can serve the model (auto and torch-free),
else the hand-written forward (model.py: FastLlama) with its decode steps in native code (torch+native) or in
torch (torch, or torch+native without a C compiler), else transformers' own forward for what FastLlama does not
run. `why` and `weights_why` are what tabd/stats reports. The hand-over after a torch-free start is another
choice (after_hand_over), made once torch+native is built over the same weights.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tabd.predictor.loading import loader
from tabd.predictor.engine.runner import Runner
from tabd.predictor.loading.engine_names import AUTO, TORCH, TORCH_FREE, TORCH_NATIVE, TRANSFORMERS, canonical
from tabd.predictor.backends.backend_settings import LocalSettings
from tabd.predictor.loading.threads import AdaptiveThreads
from tabd.predictor.types import ModelLoadError


@dataclass(frozen=True)
class ModelFacts:
    """What the backend reads about the model once a runner holds its weights: no tensors."""

    config: Any  # transformers' config, or the same numbers read from config.json
    device: Any  # a torch.device, or "cpu" (torch-free)
    dtype: Any  # a torch dtype, or "float32" (torch-free)
    parameters: int


@dataclass(frozen=True)
class EngineChoice:
    name: str  # the engine serving, by its one name (engine_names.SERVED): what tabd reports
    runner: Runner
    why: str  # why this engine (tabd/stats "engine_why")
    weights_why: str  # the format the weights are held in, and why (tabd/stats "weights")
    model: ModelFacts
    tokenizer: Any
    placement: loader.Placement
    hands_over: bool = False  # a torch-free start that torch+native takes over once torch is imported (auto)

    @property
    def numpy_logits(self) -> bool:
        """The torch-free runner's logits are numpy arrays."""
        return self.name == TORCH_FREE

    @property
    def native_passes(self) -> bool:
        """Whether the runner verifies several tokens a native pass (what prompt-lookup drafts need)."""
        return self.name in (TORCH_FREE, TORCH_NATIVE)


def choose(settings: LocalSettings, threads: AdaptiveThreads) -> EngineChoice:
    """The engine `settings.engine` asks for where it can serve the model, else the one that can and why;
    ModelLoadError where the engine asked for cannot."""
    try:
        engine = canonical(settings.engine)
    except ValueError as exc:
        raise ModelLoadError(str(exc), "engine") from None
    # a GGUF file is served from its imported directory (converted once, cached), by whichever engine serves that
    model_dir = str(loader.model_dir_for(settings.model_dir) or loader.DEFAULT_MODEL_DIR)
    why = f"{engine} (asked for)"
    if engine in (AUTO, TORCH_FREE):
        if settings.trust_remote_code:
            if engine == TORCH_FREE:
                raise ModelLoadError(f"the {engine} engine runs no model's own code", "engine")
        else:
            choice, why_not = _torch_free(model_dir, settings, threads, engine)
            if choice is not None:
                return choice
            if engine == TORCH_FREE:
                raise ModelLoadError(f"the {engine} engine cannot serve {model_dir}: {why_not}", "engine")
            why = f"torch (the torch-free runner cannot serve this model here: {why_not})"
    engine = TORCH_NATIVE if engine == AUTO else engine
    model, tokenizer, placement = loader.load(model_dir, settings.device, settings.trust_remote_code,
                                              fast=engine in (TORCH_NATIVE, TORCH))
    threads.use_torch()
    return _torch_engine(engine, model_dir, model, tokenizer, placement, settings.weights, why)


def _one() -> int:
    return 1


def _torch_free(model_dir: str, settings: LocalSettings, threads: AdaptiveThreads,
                engine: str) -> tuple[EngineChoice | None, str]:
    """(the torch-free runner's choice, "") where it can serve this model here, else (None, why not). It needs no
    torch: `import torch` is most of a cold start."""
    from tabd.predictor.loading import fastload
    from tabd.predictor.engine import boot

    d = loader.check_model_dir(model_dir)
    why = boot.why_not(d, settings.device)
    if why:
        return None, why
    try:
        # one thread until the hand-over (auto): the native prefill is a long run of small calls, and when another
        # process takes a core each of their barriers can stall a whole time slice (two of five cold starts took
        # 10.6 and 12.8 s with two threads under load); the torch-free engine asked for adapts
        runner = boot.load(d, settings.weights, threads if engine == TORCH_FREE or threads.fixed else _one)
        tokenizer = fastload.tokenizer_for(d, runner.config.model_type)
    except Exception as exc:  # a tensor missing, a dtype or a file it cannot read: torch's loader says it clearly
        return None, f"{type(exc).__name__}: {exc}"[:300]
    facts = ModelFacts(runner.config, "cpu", "float32", runner.parameters)
    why = f"{TORCH_FREE} (the native step serves the whole forward pass from numpy buffers)"
    return EngineChoice(TORCH_FREE, runner, why, runner.weights_why, facts, tokenizer,
                        loader.Placement("cpu", "float32"), hands_over=engine == AUTO), ""


def _torch_engine(engine: str, model_dir: str, model, tokenizer, placement: loader.Placement, weights: str,
                  why: str) -> EngineChoice:
    """FastLlama for Llama-shaped models (its steps in native code for torch+native, where a C compiler is), holding
    the weights once in the format `weights` names; else transformers' forward."""
    from tabd.predictor.engine.layout import choose_format

    parameters = sum(p.numel() for p in model.parameters())
    try:
        fmt, weights_why = choose_format(weights, 4 * parameters)
    except ValueError as exc:
        raise ModelLoadError(str(exc), "weights") from None
    if engine in (TORCH_NATIVE, TORCH):
        from tabd.predictor.engine.model import FastLlama, supported

        if supported(model.config):
            if engine == TORCH and fmt != "fp32":
                fmt, weights_why = "fp32", "fp32 (the torch engine decodes in fp32)"
            runner = FastLlama(model, native=engine == TORCH_NATIVE, weights=fmt, release=True)
            weights_why = weights_why if runner.weights == fmt else runner.weights
            served = TORCH_NATIVE if runner.native is not None else TORCH
            facts = ModelFacts(model.config, model.device, model.dtype, parameters)  # the runner holds the weights
            return EngineChoice(served, runner, why, weights_why, facts, tokenizer, placement)
        if not hasattr(model, "forward"):  # read without transformers, which transformers' forward needs
            model, tokenizer, placement = loader.load(model_dir, placement.device)
    from tabd.predictor.engine.runner import TransformersRunner

    weights_why = f"{str(model.dtype).removeprefix('torch.')} (transformers' own tensors)"
    facts = ModelFacts(model.config, model.device, model.dtype, parameters)
    return EngineChoice(TRANSFORMERS, TransformersRunner(model), why, weights_why, facts, tokenizer, placement)


def after_hand_over(choice: EngineChoice, runner: Runner) -> EngineChoice:
    """The torch+native engine over the torch-free runner's weights (engine/swap.py) serving from now on."""
    why = (f"{TORCH_NATIVE} (took over from the {TORCH_FREE} engine after it had answered: torch's prefill runs a long "
           "prompt several times faster than native pieces)")
    return dataclasses.replace(choice, name=TORCH_NATIVE, runner=runner, why=why, hands_over=False)
