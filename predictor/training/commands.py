"""`tabd train` (a resumable training run), `tabd train corpus` (the PyPI corpus), `tabd train corpus-npm` (npm's)
and `tabd train edits` (pairs of files from consecutive releases, for next-edit rows)."""
from __future__ import annotations

import argparse

from tabd.predictor.training import corpus, edits_corpus, npm_corpus, train


def add_arguments(parser: argparse.ArgumentParser) -> None:
    train.add_arguments(parser)
    sub = parser.add_subparsers(dest="train_action", metavar="ACTION")
    corpus.add_arguments(sub.add_parser("corpus", help="download the pinned distributions and build the corpus file",
                                        description=corpus.__doc__.splitlines()[0]))
    edits_corpus.add_arguments(sub.add_parser("edits", help="download the releases before the pinned ones and pair their changed files",
                                              description=edits_corpus.__doc__.splitlines()[0]))
    npm_corpus.add_arguments(sub.add_parser("corpus-npm", help="download the pinned npm packages and build the JS/TS corpus",
                                            description=npm_corpus.__doc__.splitlines()[0]))


def run(args: argparse.Namespace) -> int:
    if getattr(args, "train_action", None) == "corpus":
        return corpus.run(args)
    if getattr(args, "train_action", None) == "edits":
        return edits_corpus.run(args)
    if getattr(args, "train_action", None) == "corpus-npm":
        return npm_corpus.run(args)
    return train.run(args)
