"""The local engines' names, declared once and without torch: what `--engine` accepts, the backend builds and tabd reports.

Each engine has one name, which says what runs the forward pass (ENGINES, `auto` choosing among the others): the
backend is built by it, and tabd/stats, the log's `engine` field, the benches and Prediction.engine report it.
ALIASES maps an older name that is still accepted as input to the engine it means, so that a command line or a
config written for an earlier tabd keeps working; those names are never used inside, nor reported. They are also
the names logs written before this one report (`native`, `fast`, `hf`): `canonical` reads them too.

"native" means only the C code (engine/native.py, native/decode.c); "torch-free" is the engine that serves the
whole forward pass from it (engine/boot.py), "torch+native" the one that runs torch's prefill and native decode steps.
"""
from __future__ import annotations

AUTO = "auto"
TORCH_FREE = "torch-free"
TORCH_NATIVE = "torch+native"
TORCH = "torch"
TRANSFORMERS = "transformers"

ENGINES: tuple[str, ...] = (AUTO, TORCH_FREE, TORCH_NATIVE, TORCH, TRANSFORMERS)
ALIASES: dict[str, str] = {"native": TORCH_FREE, "fast": TORCH_NATIVE, "hf": TRANSFORMERS, "plain": TRANSFORMERS}
CHOICES: tuple[str, ...] = ENGINES + tuple(ALIASES)  # every name --engine accepts

# what each engine is, in a line (--help and the README's flag table)
HELP: dict[str, str] = {
    AUTO: f"{TORCH_FREE} where it can run the model, then {TORCH_NATIVE} takes over once torch is imported; "
          f"else {TORCH_NATIVE}",
    TORCH_FREE: "the whole forward pass in native code over numpy arrays, torch never imported "
                "(a Llama-shaped model on the CPU, a C compiler)",
    TORCH_NATIVE: "the hand-written forward in torch for prompts, each decode step in native code "
                  f"({TORCH} where no C compiler is)",
    TORCH: "the same hand-written forward, in torch alone",
    TRANSFORMERS: "transformers' own forward (any architecture transformers loads), over the same KV cache",
}

SERVED: tuple[str, ...] = (TORCH_FREE, TORCH_NATIVE, TORCH, TRANSFORMERS)  # what auto resolves to


def canonical(name: str) -> str:
    """The engine a name means (an alias resolved); ValueError for a name that is neither."""
    if name in ENGINES:
        return name
    if name in ALIASES:
        return ALIASES[name]
    raise ValueError(f"unknown engine {name!r}: use {', '.join(ENGINES)}")
