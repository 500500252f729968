"""Train tabd's embedded default model: a small GQA Llama on the Python stdlib, FIM-formatted.

Read top to bottom: configuration, data (stdlib files and the held-out split),
tokenizer, model, FIM samples, the training loop, evaluation, the CLI.
`tabd train --minutes N` reproduces the shipped model in predictor/model/.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import random
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

EOT, PRE, SUF, MID, PAD = "<tabd_eot>", "<tabd_pre>", "<tabd_suf>", "<tabd_mid>", "<tabd_pad>"
SPECIAL_TOKENS = [EOT, PRE, SUF, MID, PAD]  # ids 0..4, in this order

DEFAULT_OUT = Path(__file__).resolve().parent / "model"


@dataclass
class TrainConfig:
    seed: int = 1337
    out: str = str(DEFAULT_OUT)
    # data
    stdlib: str = ""               # empty: the running interpreter's stdlib
    include_tests: bool = True     # test folders are ~60% of the stdlib's code; without them we would repeat epochs
    val_percent: float = 2.0       # files whose path hash falls below this percentage are held out
    max_files: int = 0             # 0: all (tests use a handful)
    # tokenizer
    vocab_size: int = 8192
    tokenizer_dir: str = ""        # reuse a saved tokenizer instead of training one
    init_dir: str = ""             # start from these weights instead of a random init (resuming)
    # model (Llama with grouped-query attention)
    hidden: int = 192
    layers: int = 4
    heads: int = 6
    kv_heads: int = 2              # grouped-query attention: the daemon's KV cache is 3x smaller
    intermediate: int = 512
    max_positions: int = 2048
    # FIM mixture (the rest is plain text)
    p_spm: float = 0.6
    p_psm: float = 0.2
    prefix_chars: int = 3000
    suffix_chars: int = 1000
    # optimisation
    seq_len: int = 1024             # the daemon's prompts (2-2.5k chars of prefix, 0.5-1k of suffix) are ~900 tokens
    batch: int = 4
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 40
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    minutes: float = 75.0          # wall-clock budget for the training loop; the schedule follows elapsed time
    max_steps: int = 0             # 0: until the time budget ends
    threads: int = 2
    bf16: bool = False             # bf16 autocast measured 10-30x slower than fp32 for training on this VM's CPU
    log_every: int = 10
    # evaluation
    val_rows: int = 64
    eval_lines: int = 200


# ---------------------------------------------------------------- data

def stdlib_root(cfg: TrainConfig) -> Path:
    return Path(cfg.stdlib or sysconfig.get_paths()["stdlib"])


def is_held_out(rel_path: str, val_percent: float) -> bool:
    """Deterministic split by a hash of the relative path, stable across machines and runs."""
    h = int.from_bytes(hashlib.sha256(rel_path.encode("utf-8")).digest()[:8], "big")
    return (h % 10000) < val_percent * 100


def list_sources(cfg: TrainConfig) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(train, val) lists of (relative path, text) for the stdlib's .py files, sorted by path."""
    root = stdlib_root(cfg)
    train, val = [], []
    for path in sorted(root.rglob("*.py")):
        if cfg.max_files and len(train) >= cfg.max_files and len(val) >= max(1, cfg.max_files // 4):
            break
        rel = path.relative_to(root).as_posix()
        parts = rel.split("/")
        if "site-packages" in parts or "dist-packages" in parts:
            continue
        if not cfg.include_tests and any(p in ("test", "tests", "idle_test") for p in parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # a few test files are deliberately not UTF-8
        if not text.strip() or len(text) > 400_000:
            continue  # generated tables are not code anyone types
        (val if is_held_out(rel, cfg.val_percent) else train).append((rel, text))
    if cfg.max_files:
        train, val = train[: cfg.max_files], val[: max(1, cfg.max_files // 4)]
    return train, val


# ---------------------------------------------------------------- tokenizer

def train_tokenizer(texts: list[str], vocab_size: int):
    """Byte-level BPE (GPT-2 split rule) with tabd's five special tokens as ids 0..4."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return wrap_tokenizer(tok)


def wrap_tokenizer(tok):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOT,
        bos_token=EOT,
        pad_token=PAD,
        unk_token=None,
        additional_special_tokens=[PRE, SUF, MID],
        clean_up_tokenization_spaces=False,
        model_max_length=2048,
    )


def save_tokenizer(tokenizer, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(out))
    # transformers 5 writes its internal class name; the generic name also loads in transformers 4.x.
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    # transformers 5 folds the special tokens into tokenizer_config.json; older loaders look here too.
    special = {"bos_token": EOT, "eos_token": EOT, "pad_token": PAD, "additional_special_tokens": [PRE, SUF, MID]}
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


def load_tokenizer(path: str | Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def special_ids(tokenizer) -> dict[str, int]:
    return {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}


# ---------------------------------------------------------------- model

def build_model(cfg: TrainConfig, tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    ids = special_ids(tokenizer)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden,
        intermediate_size=cfg.intermediate,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        num_key_value_heads=cfg.kv_heads,
        max_position_embeddings=cfg.max_positions,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=ids[EOT],
        eos_token_id=ids[EOT],
        pad_token_id=ids[PAD],
        initializer_range=0.02,
    )
    return LlamaForCausalLM(config)


def count_params(model) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights are counted once


# ---------------------------------------------------------------- FIM samples
#
# The daemon prompts suffix-first (SPM) and lets the prefix run straight into the
# middle, so accepting a suggestion only extends the token sequence:
#   SPM   <suf> suffix <pre> prefix middle <eot>
#   PSM   <pre> prefix <suf> suffix <mid> middle <eot>
#   plain text <eot>
# Prefix, middle and suffix are tokenized separately, as the daemon tokenizes a
# prompt that ends at the cursor. A FIM sample starts every row (position 0, as
# in the daemon); the rest of the row is filled with plain text so nothing is padding.

def line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line, end at the '\\n' (exclusive)."""
    spans, start = [], 0
    while start <= len(text):
        end = text.find("\n", start)
        if end < 0:
            spans.append((start, len(text)))
            break
        spans.append((start, end))
        start = end + 1
    return spans


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
        if u < 0.25:
            cut = indent  # the cursor after auto-indent
        elif u < 0.30:
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


def fim_sample(text: str, tok, ids: dict[str, int], cfg: TrainConfig, rng: random.Random, budget: int) -> list[int]:
    start, end = pick_middle(text, rng)
    prefix = text[max(0, start - rng.randint(cfg.prefix_chars // 3, cfg.prefix_chars)):start]
    suffix = text[end:end + rng.randint(0, cfg.suffix_chars)]
    mid = encode(tok, text[start:end])[: budget // 4]
    suf = encode(tok, suffix)[: budget // 3]
    spm = rng.random() < cfg.p_spm / (cfg.p_spm + cfg.p_psm)
    room = budget - len(mid) - len(suf) - (3 if spm else 4)
    pre = encode(tok, prefix)[-room:] if room > 0 else []
    if spm:
        return [ids[SUF], *suf, ids[PRE], *pre, *mid, ids[EOT]]
    return [ids[PRE], *pre, ids[SUF], *suf, ids[MID], *mid, ids[EOT]]


def plain_tokens(texts: list[str], tok, ids: dict[str, int], rng: random.Random, n: int) -> list[int]:
    """n tokens of plain text: a random file from a random line (or its start), then whole files."""
    out: list[int] = []
    text = rng.choice(texts)
    starts = [s for s, _ in line_spans(text)]
    pos = 0 if rng.random() < 0.3 else rng.choice(starts)
    while len(out) < n:
        chunk = text[pos:pos + 6 * (n - len(out)) + 64]
        out += encode(tok, chunk)
        pos += len(chunk)
        if pos >= len(text):
            out.append(ids[EOT])
            text, pos = rng.choice(texts), 0
    return out[:n]


def encode(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"] if text else []


def make_row(texts: list[str], weights: list[int], tok, ids, cfg: TrainConfig, rng: random.Random) -> list[int]:
    """seq_len + 1 tokens (inputs and shifted targets)."""
    n = cfg.seq_len + 1
    if rng.random() < cfg.p_spm + cfg.p_psm:
        row = fim_sample(rng.choices(texts, weights)[0], tok, ids, cfg, rng, n)
    else:
        row = []
    if len(row) < n:
        row += plain_tokens(texts, tok, ids, rng, n - len(row))
    return row[:n]


def make_batch(texts, weights, tok, ids, cfg: TrainConfig, rng: random.Random, rows: int):
    import torch

    data = torch.tensor([make_row(texts, weights, tok, ids, cfg, rng) for _ in range(rows)], dtype=torch.long)
    return data[:, :-1], data[:, 1:]


# ---------------------------------------------------------------- training

def lr_at(cfg: TrainConfig, step: int, progress: float) -> float:
    """Linear warm-up by step, then cosine to min_lr over the budget (progress in [0, 1])."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    cos = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cos)


def make_optimizer(model, cfg: TrainConfig):
    import torch

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)


def loss_of(model, x, y, cfg: TrainConfig):
    import torch
    import torch.nn.functional as F

    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16):
        logits = model(input_ids=x, use_cache=False).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))


def save_model(model, tok, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    save_tokenizer(tok, out)


def train(cfg: TrainConfig, progress_bar: bool = True) -> dict:
    import torch
    from tqdm import tqdm

    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2) + "\n")

    train_files, val_files = list_sources(cfg)
    texts = [t for _, t in train_files]
    weights = [len(t) for t in texts]  # FIM cursors land uniformly over characters, not files
    tok = load_tokenizer(cfg.tokenizer_dir) if cfg.tokenizer_dir else train_tokenizer(texts, cfg.vocab_size)
    save_tokenizer(tok, out)
    ids = special_ids(tok)
    if cfg.init_dir:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(cfg.init_dir, use_safetensors=True, dtype="float32")
    else:
        model = build_model(cfg, tok)
    n_params = count_params(model)
    print(f"tabd train: {len(train_files)} train files, {len(val_files)} held out, "
          f"{n_params / 1e6:.2f}M parameters, vocab {len(tok)}", file=sys.stderr)

    opt = make_optimizer(model, cfg)
    rng = random.Random(cfg.seed)
    budget_s = cfg.minutes * 60
    tokens_per_step = cfg.batch * cfg.seq_len
    log = (out / "train_log.jsonl").open("w")
    bar = tqdm(total=cfg.max_steps or None, disable=not progress_bar, unit="step", dynamic_ncols=True)
    step, tokens, ema, t0 = 0, 0, None, time.monotonic()
    last_save = t0
    model.train()
    try:
        while True:
            elapsed = time.monotonic() - t0
            progress = elapsed / budget_s if budget_s > 0 else 1.0
            if cfg.max_steps:
                progress = max(progress, step / cfg.max_steps) if budget_s > 0 else step / cfg.max_steps
            if progress >= 1.0 or (cfg.max_steps and step >= cfg.max_steps):
                break
            lr = lr_at(cfg, step, progress)
            for g in opt.param_groups:
                g["lr"] = lr
            x, y = make_batch(texts, weights, tok, ids, cfg, rng, cfg.batch)
            loss = loss_of(model, x, y, cfg)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            step += 1
            tokens += tokens_per_step
            value = loss.item()
            ema = value if ema is None else 0.95 * ema + 0.05 * value
            tok_s = tokens / (time.monotonic() - t0)
            bar.update(1)
            bar.set_postfix(loss=f"{ema:.3f}", lr=f"{lr:.2e}", tok_s=f"{tok_s:.0f}")
            if step % cfg.log_every == 0 or step == 1:
                log.write(json.dumps({"step": step, "tokens": tokens, "loss": round(value, 4), "loss_ema": round(ema, 4),
                                      "lr": lr, "elapsed_s": round(time.monotonic() - t0, 1),
                                      "tok_s": round(tok_s, 1)}) + "\n")
                log.flush()
            if time.monotonic() - last_save > 600:  # a crash late in a long run keeps most of it
                save_model(model, tok, out)
                last_save = time.monotonic()
    except KeyboardInterrupt:
        print("tabd train: interrupted; saving what there is", file=sys.stderr)
    bar.close()
    train_s = time.monotonic() - t0
    save_model(model, tok, out)

    results = {"params": n_params, "vocab": len(tok), "steps": step, "tokens_seen": tokens,
               "train_seconds": round(train_s, 1), "tokens_per_s": round(tokens / max(train_s, 1e-9), 1),
               "train_loss_ema": None if ema is None else round(ema, 4),
               "train_files": len(train_files), "val_files": len(val_files)}
    results.update(evaluate(model, tok, [t for _, t in val_files], cfg))
    log.write(json.dumps({"event": "eval", **results}) + "\n")
    log.close()
    (out / "eval.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


# ---------------------------------------------------------------- evaluation

def evaluate(model, tok, val_texts: list[str], cfg: TrainConfig) -> dict:
    """Validation loss on held-out files (training mixture) and next-line exact match with SPM prompts."""
    import torch

    model.eval()
    ids = special_ids(tok)
    rng = random.Random(cfg.seed + 1)
    weights = [len(t) for t in val_texts]
    losses = []
    with torch.no_grad():
        for i in range(0, cfg.val_rows, cfg.batch):
            x, y = make_batch(val_texts, weights, tok, ids, cfg, rng, min(cfg.batch, cfg.val_rows - i))
            losses.append(loss_of(model, x, y, dataclasses.replace(cfg, bf16=False)).item())
    hits, stripped_hits, cases = 0, 0, next_line_cases(val_texts, cfg.eval_lines, random.Random(cfg.seed + 2))
    for prefix, suffix, line in cases:
        guess = complete_line(model, tok, ids, prefix, suffix)
        hits += guess == line
        stripped_hits += guess.strip() == line.strip()
    n = max(1, len(cases))
    model.train()
    return {"val_loss": round(sum(losses) / max(1, len(losses)), 4), "val_rows": cfg.val_rows,
            "next_line_exact": round(hits / n, 4), "next_line_exact_stripped": round(stripped_hits / n, 4),
            "next_line_samples": len(cases)}


def next_line_cases(texts: list[str], n: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """(prefix ending at a line start, suffix after that line, the line) from held-out files, daemon-sized windows."""
    candidates = []
    for ti, text in enumerate(texts):
        for start, end in line_spans(text):
            if start > 0 and text[start:end].strip():
                candidates.append((ti, start, end))
    cases = []
    for ti, start, end in rng.sample(candidates, min(n, len(candidates))):
        text = texts[ti]
        cases.append((text[max(0, start - 2000):start], text[end:end + 800], text[start:end]))
    return cases


def complete_line(model, tok, ids: dict[str, int], prefix: str, suffix: str, max_new: int = 48) -> str:
    """Greedy decode with the SPM prompt until a newline or <eot>; the text before the newline."""
    import torch

    prompt = [ids[SUF], *encode(tok, suffix), ids[PRE], *encode(tok, prefix)]
    out_ids: list[int] = []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt]), use_cache=True)
        for _ in range(max_new):
            nxt = int(out.logits[0, -1].argmax())
            if nxt == ids[EOT]:
                break
            out_ids.append(nxt)
            if "\n" in tok.decode(out_ids[-1:]):
                break
            out = model(input_ids=torch.tensor([[nxt]]), cache=out.cache, use_cache=True)
    return tok.decode(out_ids).split("\n")[0]


# ---------------------------------------------------------------- CLI

def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = TrainConfig()
    parser.add_argument("--out", default=d.out, help="output directory (default: the shipped predictor/model)")
    parser.add_argument("--minutes", type=float, default=d.minutes, help="wall-clock budget for training; then it saves and evaluates")
    parser.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: the time budget decides)")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--threads", type=int, default=d.threads, help="torch threads")
    parser.add_argument("--tokenizer", default="", help="reuse the tokenizer in this directory instead of training one")
    parser.add_argument("--init", default="", help="start from the weights in this directory (resume a run)")
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
    parser.add_argument("--eval-lines", type=int, default=d.eval_lines, help="next-line exact-match samples")
    parser.add_argument("--val-rows", type=int, default=d.val_rows, help="held-out rows of seq-len tokens for the validation loss")
    parser.add_argument("--stdlib", default="", help="source tree (default: this interpreter's stdlib)")
    parser.add_argument("--max-files", type=int, default=0, help="use only the first N files (smoke tests)")
    parser.add_argument("--no-tests", action="store_true", help="leave out the stdlib's test folders")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(
        seed=args.seed, out=args.out, stdlib=args.stdlib, include_tests=not args.no_tests,
        max_files=args.max_files, vocab_size=args.vocab_size, tokenizer_dir=args.tokenizer, init_dir=args.init,
        hidden=args.hidden, layers=args.layers, intermediate=args.intermediate, heads=args.heads,
        kv_heads=args.kv_heads, bf16=args.bf16, seq_len=args.seq_len,
        batch=args.batch, lr=args.lr, minutes=args.minutes, max_steps=args.steps, threads=args.threads,
        eval_lines=args.eval_lines, val_rows=args.val_rows,
    )


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # long files exceed model_max_length by design; we cut them ourselves
    results = train(config_from_args(args), progress_bar=not args.no_progress)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="tabd train", description=__doc__)
    add_arguments(parser)
    sys.exit(run(parser.parse_args()))
