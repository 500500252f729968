"""Train tabd's embedded default model: a small GQA Llama on Python code, FIM-formatted.

Read top to bottom: configuration, the model, the resumable loop, the CLI.
Training rows (FIM samples in the daemon's own layout, some with workspace
context before them, and plain text) live in rows.py, data sources in data.py,
the PyPI corpus in corpus.py, held-out figures in evaluate.py.

A run checkpoints weights, optimizer and data-sampler state every few minutes
outside git; `--resume DIR` continues it (the same batches, so the same loss
curve), and `--init DIR` starts from saved weights, such as the shipped ones.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tabd.predictor.prompt.fim import EOT, PAD, SPECIAL_TOKENS
from tabd.predictor.training.data import Source, cap_test_share, corpus_sources, is_held_out, stdlib_sources
from tabd.predictor.training.edits_corpus import read_pairs
from tabd.predictor.training.evaluate import evaluate, loss_of
from tabd.predictor.training.rows import Rows

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "model"
CHECKPOINT = "checkpoint.pt"
__all__ = ["TrainConfig", "train", "is_held_out", "SPECIAL_TOKENS"]


@dataclass
class TrainConfig:
    seed: int = 1337
    out: str = str(DEFAULT_OUT)
    # data
    stdlib: str = ""               # empty: the running interpreter's stdlib
    corpus: str = ""               # a `tabd train corpus` file (gzipped JSONL); empty: the stdlib only
    train_stdlib: bool = True      # False (--no-stdlib): the corpus only; the stdlib's held-out split still validates
    edits: str = ""                # a `tabd train edits` file: release pairs for next-edit rows (edit_rows.py)
    extra_corpora: list[str] = dataclasses.field(default_factory=list)  # more corpus files (`--corpus` again): npm's
    include_tests: bool = True
    test_share: float = 0.15       # test files' most share of the characters trained on
    val_percent: float = 2.0       # stdlib files whose path hash falls below this percentage are held out
    max_files: int = 0             # 0: all (tests use a handful)
    # tokenizer
    vocab_size: int = 8192
    tokenizer_dir: str = ""        # reuse a saved tokenizer instead of training one
    init_dir: str = ""             # start from these weights instead of a random init
    resume: str = ""               # continue the run whose checkpoint is in this directory
    # model (Llama with grouped-query attention)
    hidden: int = 192
    layers: int = 4
    heads: int = 6
    kv_heads: int = 2              # grouped-query attention: the daemon's KV cache is 3x smaller
    intermediate: int = 512
    max_positions: int = 2048
    # row mixture: FIM samples first in a row (the rest plain text)
    p_spm: float = 0.6
    p_psm: float = 0.2
    p_edit: float = 0.0            # rows that start with a next-edit sample (needs `edits`)
    p_context: float = 0.3         # FIM samples with chunks of the same repository's other files before them
    context_tokens: int = 320
    p_context_needed: float = 0.5  # of those, the share whose chunks are picked by what the middle needs too
    prefix_chars: int = 3000
    suffix_chars: int = 1000
    # optimisation
    seq_len: int = 1536            # daemon prompts are ~900 tokens, plus workspace context
    batch: int = 4
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 40
    decay_frac: float = 0.2        # the last share of the budget decays the learning rate linearly
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    minutes: float = 75.0          # budget for this run, in training time (TrainClock: pauses left out)
    max_steps: int = 0             # 0: until the time budget ends; else the schedule follows steps
    checkpoint_minutes: float = 5.0
    threads: int = 2
    bf16: bool = False             # bf16 autocast measured 10-30x slower than fp32 for training on this VM's CPU
    log_every: int = 10
    # evaluation
    val_rows: int = 64
    eval_lines: int = 200


# ---------------------------------------------------------------- tokenizer and model

def train_tokenizer(texts: list[str], vocab_size: int):
    """Byte-level BPE (GPT-2 split rule) with tabd's five special tokens as ids 0..4."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOT, bos_token=EOT, pad_token=PAD, unk_token=None,
                                   additional_special_tokens=list(SPECIAL_TOKENS[1:4]),
                                   clean_up_tokenization_spaces=False, model_max_length=2048)


def save_tokenizer(tokenizer, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(out))
    # transformers 5 writes its internal class name; the generic name also loads in transformers 4.x.
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    special = {"bos_token": EOT, "eos_token": EOT, "pad_token": PAD, "additional_special_tokens": list(SPECIAL_TOKENS[1:4])}
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


def load_tokenizer(path: str | Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def build_model(cfg: TrainConfig, tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    eot, pad = tokenizer.convert_tokens_to_ids(EOT), tokenizer.convert_tokens_to_ids(PAD)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden, intermediate_size=cfg.intermediate,
        num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads,
        max_position_embeddings=cfg.max_positions, rope_theta=10000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=True, bos_token_id=eot, eos_token_id=eot, pad_token_id=pad, initializer_range=0.02,
    )
    return LlamaForCausalLM(config)


def load_model(path: str | Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path), use_safetensors=True, dtype="float32")


def count_params(model) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights are counted once


# ---------------------------------------------------------------- the loop

def lr_at(cfg: TrainConfig, step: int, progress: float) -> float:
    """Linear warm-up by step, a plateau, then linear decay to min_lr over the last decay_frac of the budget.

    The plateau is what lets a run be continued in a later session without a
    schedule that had to know the total length in advance.
    """
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    start = 1.0 - cfg.decay_frac
    if progress <= start or cfg.decay_frac <= 0:
        return cfg.lr
    t = min(1.0, (progress - start) / cfg.decay_frac)
    return cfg.lr * (1 - t * (1 - cfg.min_lr_ratio))


def make_optimizer(model, cfg: TrainConfig):
    import torch

    decay = [p for _, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for _, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)


def save_model(model, tok, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    save_tokenizer(tok, out)


@dataclass
class Progress:
    step: int = 0
    tokens: int = 0
    elapsed_s: float = 0.0  # training seconds of this run (the schedule's clock)
    ema: float | None = None
    total_tokens: int = 0   # across every run that led to these weights


def save_checkpoint(path: Path, model, opt, rows: Rows, progress: Progress, cfg: TrainConfig) -> None:
    """Weights, optimizer and sampler state, written whole or not at all."""
    import torch

    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "rng": rows.rng.getstate(),
                "progress": dataclasses.asdict(progress), "cfg": dataclasses.asdict(cfg)}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path):
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def gather_sources(cfg: TrainConfig) -> tuple[list[Source], list[Source]]:
    train_src, val_src = stdlib_sources(cfg.stdlib, cfg.val_percent, cfg.max_files)
    if not cfg.train_stdlib:
        train_src = []  # code already on the machine is not training data; its held-out split only measures
    for path in [cfg.corpus, *cfg.extra_corpora]:
        if path:
            train_src += corpus_sources(path)
    if not cfg.include_tests:
        train_src = [s for s in train_src if not s.test]
    return cap_test_share(train_src, cfg.test_share, cfg.seed), val_src


def prepare(cfg: TrainConfig):
    """(model, tokenizer, checkpoint or None), from --resume, --init or scratch."""
    out = Path(cfg.out)
    if cfg.resume:
        ckpt = load_checkpoint(Path(cfg.resume) / CHECKPOINT)
        tok = load_tokenizer(cfg.resume)
        model = load_model(cfg.resume)
        model.load_state_dict(ckpt["model"])
        return model, tok, ckpt
    if cfg.init_dir:
        return load_model(cfg.init_dir), load_tokenizer(cfg.tokenizer_dir or cfg.init_dir), None
    tok = load_tokenizer(cfg.tokenizer_dir) if cfg.tokenizer_dir else None
    if tok is None:
        texts = [s.text for s in stdlib_sources(cfg.stdlib, cfg.val_percent, cfg.max_files)[0]] if cfg.train_stdlib \
            else [s.text for path in [cfg.corpus, *cfg.extra_corpora] if path for s in corpus_sources(path)]
        tok = train_tokenizer(texts, cfg.vocab_size)
    out.mkdir(parents=True, exist_ok=True)
    return build_model(cfg, tok), tok, None


def train(cfg: TrainConfig, progress_bar: bool = True) -> dict:
    import torch
    from tqdm import tqdm

    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2) + "\n")
    model, tok, ckpt = prepare(cfg)
    train_src, val_src = gather_sources(cfg)
    rows = Rows(train_src, tok, cfg, cfg.seed, read_pairs(cfg.edits) if cfg.edits and cfg.p_edit > 0 else None)
    opt = make_optimizer(model, cfg)
    prog = Progress()
    if ckpt is not None:
        opt.load_state_dict(ckpt["opt"])
        rows.rng.setstate(ckpt["rng"])
        prog = Progress(**ckpt["progress"])
        if cfg.max_steps == 0:
            prog.elapsed_s = 0.0  # a new session's time budget starts now
    else:
        prior = Path(cfg.init_dir) / "eval.json" if cfg.init_dir else None
        if prior is not None and prior.exists():
            prog.total_tokens = json.loads(prior.read_text()).get("tokens_seen_total", json.loads(prior.read_text()).get("tokens_seen", 0))
    save_tokenizer(tok, out)
    if ckpt is None:
        (out / "train_log.jsonl").write_text("")  # a new run's log; a resumed run appends to its own
    n_params = count_params(model)
    chars = sum(len(s.text) for s in train_src)
    print(f"tabd train: {len(train_src)} train files ({chars / 1e6:.1f} MB), {len(rows.edits)} release pairs for edit rows, "
          f"{len(val_src)} held out, "
          f"{n_params / 1e6:.2f}M parameters, vocab {len(tok)}, from step {prog.step}", file=sys.stderr)
    stats = loop(model, opt, rows, prog, cfg, out, progress_bar)
    save_model(model, tok, out)
    save_checkpoint(out / CHECKPOINT, model, opt, rows, prog, cfg)
    results = {"params": n_params, "vocab": len(tok), "steps": prog.step, "tokens_seen": prog.tokens,
               "tokens_seen_total": prog.total_tokens, **stats,
               "train_loss_ema": None if prog.ema is None else round(prog.ema, 4),
               "train_files": len(train_src), "train_mb": round(chars / 1e6, 1), "val_files": len(val_src)}
    results.update(evaluate(model, tok, out, [s.text for s in val_src], cfg))
    with (out / "train_log.jsonl").open("a") as log:
        log.write(json.dumps({"event": "eval", **results}) + "\n")
    (out / "eval.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


class TrainClock:
    """Seconds of training, pauses left out: a step that took far longer than the steps before it (the process
    was stopped, `kill -STOP`, while a benchmark ran) counts as PAUSE_FACTOR typical steps, so pausing the run
    costs it no budget and its schedule follows the work done."""

    PAUSE_FACTOR = 4.0

    def __init__(self, elapsed: float = 0.0, now: Callable[[], float] = time.monotonic) -> None:
        self.elapsed, self.now = elapsed, now
        self.last = now()
        self.typical: float | None = None  # moving average of a step's seconds

    def tick(self) -> float:
        t = self.now()
        dt, self.last = t - self.last, t
        if self.typical is not None:
            dt = min(dt, self.PAUSE_FACTOR * self.typical)
        self.typical = dt if self.typical is None else 0.9 * self.typical + 0.1 * dt
        self.elapsed += dt
        return self.elapsed


def loop(model, opt, rows: Rows, prog: Progress, cfg: TrainConfig, out: Path, progress_bar: bool) -> dict:
    import torch
    from tqdm import tqdm

    budget_s = cfg.minutes * 60
    tokens_per_step = cfg.batch * cfg.seq_len
    log = (out / "train_log.jsonl").open("a")
    bar = tqdm(total=cfg.max_steps or None, initial=prog.step, disable=not progress_bar, unit="step", dynamic_ncols=True)
    clock, run_tokens, run_start = TrainClock(prog.elapsed_s), 0, prog.elapsed_s
    last_save = time.monotonic()
    model.train()
    try:
        while True:
            prog.elapsed_s = clock.tick()
            progress = prog.step / cfg.max_steps if cfg.max_steps else prog.elapsed_s / max(budget_s, 1e-9)
            if progress >= 1.0:
                break
            lr = lr_at(cfg, prog.step, progress)
            for g in opt.param_groups:
                g["lr"] = lr
            x, y = rows.batch(cfg.batch)
            loss = loss_of(model, x, y, cfg.bf16)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            prog.step += 1
            prog.tokens += tokens_per_step
            prog.total_tokens += tokens_per_step
            run_tokens += tokens_per_step
            value = loss.item()
            prog.ema = value if prog.ema is None else 0.95 * prog.ema + 0.05 * value
            tok_s = run_tokens / max(clock.elapsed - run_start, 1e-9)
            bar.update(1)
            bar.set_postfix(loss=f"{prog.ema:.3f}", lr=f"{lr:.2e}", tok_s=f"{tok_s:.0f}")
            if prog.step % cfg.log_every == 0 or prog.step == 1:
                log.write(json.dumps({"step": prog.step, "tokens": prog.tokens, "tokens_total": prog.total_tokens,
                                      "loss": round(value, 4), "loss_ema": round(prog.ema, 4), "lr": lr,
                                      "elapsed_s": round(clock.elapsed, 1), "tok_s": round(tok_s, 1)}) + "\n")
                log.flush()
            if time.monotonic() - last_save > cfg.checkpoint_minutes * 60:
                save_checkpoint(out / CHECKPOINT, model, opt, rows, prog, cfg)
                save_model(model, rows.tok, out)
                last_save = time.monotonic()
    except KeyboardInterrupt:
        print("tabd train: interrupted; saving what there is", file=sys.stderr)
    bar.close()
    log.close()
    train_s = clock.elapsed - run_start
    return {"train_seconds": round(train_s, 1), "tokens_per_s": round(run_tokens / max(train_s, 1e-9), 1)}


# ---------------------------------------------------------------- CLI

def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = TrainConfig()
    parser.add_argument("--out", default=d.out, help="output directory (default: the shipped predictor/model)")
    parser.add_argument("--corpus", action="append", default=[],
                        help="a `tabd train corpus` (or `corpus-npm`) file to train on beside the stdlib; repeat it for more")
    parser.add_argument("--no-stdlib", action="store_true",
                        help="train on the corpus only (the stdlib is code already on this machine); its held-out split still validates")
    parser.add_argument("--edits", default="", help="a `tabd train edits` file: release pairs for next-edit rows")
    parser.add_argument("--p-edit", type=float, default=d.p_edit, help="share of rows that start with a next-edit sample")
    parser.add_argument("--minutes", type=float, default=d.minutes, help="budget for this run in minutes of training (a paused process, kill -STOP, spends none); then it saves and evaluates")
    parser.add_argument("--steps", type=int, default=0, help="stop at this global step (0: the time budget decides)")
    parser.add_argument("--checkpoint-minutes", type=float, default=d.checkpoint_minutes, help="how often to checkpoint")
    parser.add_argument("--resume", default="", help="continue the run checkpointed in this directory")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--threads", type=int, default=d.threads, help="torch threads")
    parser.add_argument("--tokenizer", default="", help="reuse the tokenizer in this directory instead of training one")
    parser.add_argument("--init", default="", help="start from the weights in this directory (e.g. predictor/model)")
    parser.add_argument("--vocab-size", type=int, default=d.vocab_size)
    parser.add_argument("--hidden", type=int, default=d.hidden)
    parser.add_argument("--layers", type=int, default=d.layers)
    parser.add_argument("--intermediate", type=int, default=d.intermediate)
    parser.add_argument("--heads", type=int, default=d.heads)
    parser.add_argument("--kv-heads", type=int, default=d.kv_heads)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (slower on CPUs without usable AMX)")
    parser.add_argument("--seq-len", type=int, default=d.seq_len)
    parser.add_argument("--batch", type=int, default=d.batch)
    parser.add_argument("--lr", type=float, default=d.lr)
    parser.add_argument("--p-context", type=float, default=d.p_context, help="share of FIM samples with repository context")
    parser.add_argument("--p-context-needed", type=float, default=d.p_context_needed,
                        help="share of context samples whose chunks are picked by what the middle needs too")
    parser.add_argument("--test-share", type=float, default=d.test_share, help="most share of characters from test files")
    parser.add_argument("--eval-lines", type=int, default=d.eval_lines, help="held-out cuts for the exact-match figures")
    parser.add_argument("--val-rows", type=int, default=d.val_rows, help="held-out rows of seq-len tokens for the validation loss")
    parser.add_argument("--stdlib", default="", help="source tree (default: this interpreter's stdlib)")
    parser.add_argument("--max-files", type=int, default=0, help="use only the first N files (smoke tests)")
    parser.add_argument("--no-tests", action="store_true", help="leave out test files")
    parser.add_argument("--log-every", type=int, default=d.log_every, help="log the loss every N steps")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    cfg = TrainConfig(
        seed=args.seed, out=args.out, stdlib=args.stdlib, corpus=corpus_arg(args.corpus)[0],
        extra_corpora=corpus_arg(args.corpus)[1:], train_stdlib=not args.no_stdlib,
        edits=args.edits, p_edit=args.p_edit, include_tests=not args.no_tests,
        test_share=args.test_share, max_files=args.max_files, vocab_size=args.vocab_size, tokenizer_dir=args.tokenizer,
        init_dir=args.init, resume=args.resume, hidden=args.hidden, layers=args.layers, intermediate=args.intermediate,
        heads=args.heads, kv_heads=args.kv_heads, bf16=args.bf16, seq_len=args.seq_len, batch=args.batch, lr=args.lr,
        p_context=args.p_context, p_context_needed=args.p_context_needed, minutes=args.minutes, max_steps=args.steps, checkpoint_minutes=args.checkpoint_minutes,
        threads=args.threads, eval_lines=args.eval_lines, log_every=args.log_every, val_rows=args.val_rows,
    )
    if cfg.resume and (Path(cfg.resume) / "train_config.json").exists():  # the run's own shape and data
        saved = json.loads((Path(cfg.resume) / "train_config.json").read_text())
        keep = {"out", "minutes", "max_steps", "threads", "checkpoint_minutes", "resume", "eval_lines", "val_rows", "log_every"}
        cfg = dataclasses.replace(cfg, **{k: v for k, v in saved.items() if k not in keep and hasattr(cfg, k)})
        cfg.init_dir = ""
    return cfg


def corpus_arg(value: list[str] | str | None) -> list[str]:
    """`--corpus` given once, many times or not at all, as a list whose first item fills TrainConfig.corpus."""
    paths = [value] if isinstance(value, str) else list(value or [])
    return paths or [""]


def check(cfg: TrainConfig) -> str | None:
    if cfg.resume and not (Path(cfg.resume) / CHECKPOINT).exists():
        return f"--resume {cfg.resume}: no {CHECKPOINT} there"
    for path in [cfg.corpus, *cfg.extra_corpora]:
        if path and not Path(path).exists():
            return f"--corpus {path}: no such file (build it with `tabd train corpus` or `tabd train corpus-npm`)"
    if not cfg.train_stdlib and not cfg.corpus:
        return "--no-stdlib needs --corpus: there is nothing else to train on"
    if cfg.edits and not Path(cfg.edits).exists():
        return f"--edits {cfg.edits}: no such file (build it with `tabd train edits`)"
    if not 0 <= cfg.p_edit <= 1 or (cfg.p_edit > 0 and not cfg.edits):
        return "--p-edit must be within 0..1, and above 0 it needs --edits"
    if not 0 <= cfg.test_share < 1 or not 0 <= cfg.p_context <= 1 or not 0 <= cfg.p_context_needed <= 1:
        return "--test-share must be within 0..1 (exclusive of 1) and --p-context and --p-context-needed within 0..1"
    return None


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # long files exceed model_max_length by design; we cut them ourselves
    cfg = config_from_args(args)
    problem = check(cfg)
    if problem:
        print(f"tabd train: {problem}", file=sys.stderr)
        return 2
    results = train(cfg, progress_bar=not args.no_progress)
    print(json.dumps(results, indent=2))
    return 0
