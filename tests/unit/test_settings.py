"""The settings table (daemon/runtime/settings.py) and what is derived from it: the flags, the initialization
options, Config's validation and the settings reference's tables (docs/settings.md) agree, because each setting is declared once."""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tabd.daemon.cli import build_parser
from tabd.daemon.runtime.config import CLIENT_OPTIONS, Config, ConfigError, apply_client_options
from tabd.daemon.runtime.options import CLI_SETTINGS, config_from_args, flags_of
from tabd.daemon.runtime.readme_tables import with_tables
from tabd.daemon.runtime.settings import BY_NAME, SETTINGS, Setting
from tabd.predictor.loading import engine_names as engines

README = Path(__file__).resolve().parents[2] / "docs" / "settings.md"  # the settings reference, moved out of the README
MINIMAL = {"serve": [], "complete": ["a.py", "--line", "0", "--character", "0"], "serve-model": [], "bench": [],
           "replay": ["s.jsonl"]}


def parse(command: str, *flags: str) -> argparse.Namespace:
    return build_parser(only=command).parse_args([command, *MINIMAL[command], *flags])


def other_value(row: Setting) -> Any:
    """A valid value for the row that is not its default."""
    if row.type is bool:
        return not row.default
    if row.type is tuple:
        return ("elsewhere/x",)
    if row.spec.choices:
        return next(c for c in row.spec.choices if c != row.default)
    if row.spec.bounds:
        lo, hi = row.spec.bounds
        return row.type(hi if hi != row.default else lo)
    return "elsewhere/x"


def bad_value(row: Setting) -> Any:
    """A value of the right type that the row's bounds or choices refuse."""
    if row.spec.choices:
        return "nonsense"
    assert row.spec.bounds is not None
    return row.type(row.spec.bounds[1]) + 1


def as_args(row: Setting, value: Any) -> list[str]:
    if row.type is tuple:
        return [part for item in value for part in (row.flag, item)]
    return [row.flag] if row.type is bool else [row.flag, str(value)]


# -- the command line -------------------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(MINIMAL))
def test_no_flags_give_the_default_config(command):
    args = parse(command)
    assert config_from_args(args) == Config()
    assert flags_of(args) == []  # nothing to pass on to a replay's or a bench's server child


@pytest.mark.parametrize("row", CLI_SETTINGS, ids=lambda r: r.flag)
def test_every_flag_sets_its_setting_and_only_that(row):
    value = other_value(row)
    config = config_from_args(parse("serve", *as_args(row, value)))
    assert getattr(config, row.name) == value
    assert dataclasses.replace(config, **{row.name: row.default}) == Config()


def test_the_old_negative_flags_keep_their_meaning():
    config = config_from_args(parse("serve", "--no-speculation", "--no-cache", "--no-kv-reuse", "--no-warmup",
                                    "--no-known-names", "--fixed-depth", "--no-context", "--context-tokens", "100"))
    assert (config.speculation, config.cache, config.kv_reuse, config.warmup, config.known_names,
            config.adaptive_depth) == (False,) * 6
    assert config.context_tokens == 0  # --no-context wins over --context-tokens, as before
    assert config_from_args(parse("serve", "--remote-timeout", "3.5")).timeout == 3.5


def test_a_replay_passes_its_server_the_settings_it_was_given():
    given = [a for row in CLI_SETTINGS if row.spec.group != "serve" for a in as_args(row, other_value(row))]
    replay = parse("replay", *given, "--no-context")
    child = parse("serve", *flags_of(replay))
    assert config_from_args(child) == config_from_args(replay) != Config()


def test_serve_alone_has_the_flags_for_the_files_it_writes():
    assert config_from_args(parse("serve", "--log", "x.jsonl", "--log-text")).log == "x.jsonl"
    with pytest.raises(SystemExit):
        parse("complete", "--record", "s.jsonl")


def test_engine_names_are_those_the_predictor_declares():
    for name in engines.CHOICES:
        assert config_from_args(parse("serve", "--engine", name)).engine == name
    with pytest.raises(SystemExit):
        parse("serve", "--engine", "no-such-engine")
    with pytest.raises(ConfigError, match="engine must be"):
        Config(engine="no-such-engine").validate()


# -- Config and the initialization options -----------------------------------------------------------


@pytest.mark.parametrize("row", [r for r in SETTINGS if r.spec.bounds or r.spec.choices], ids=lambda r: r.name)
def test_validate_names_the_setting_and_its_bounds(row):
    with pytest.raises(ConfigError, match=f"^{row.name} must be"):
        Config(**{row.name: bad_value(row)}).validate()
    Config(**{row.name: other_value(row)}).validate()


@pytest.mark.parametrize("key", sorted(CLIENT_OPTIONS))
def test_a_bad_initialization_option_is_reported_in_words_and_ignored(key):
    row = CLIENT_OPTIONS[key]
    for bad in ([1], *([bad_value(row)] if row.spec.bounds or row.spec.choices else [])):
        config, problems = apply_client_options(Config(), {key: bad})
        assert config == Config()
        assert len(problems) == 1 and f"option {key!r}" in problems[0] and "must be" in problems[0], problems


@pytest.mark.parametrize("key", sorted(CLIENT_OPTIONS))
def test_a_good_initialization_option_applies_quietly(key):
    row = CLIENT_OPTIONS[key]
    config, problems = apply_client_options(Config(), {key: other_value(row)})
    assert problems == [] and getattr(config, row.name) == other_value(row)


def test_unknown_options_are_named_with_the_known_ones():
    _, problems = apply_client_options(Config(), {"contextToken": 10})
    assert "unknown option 'contextToken'" in problems[0] and "contextTokens" in problems[0]


def test_context_options_restate_no_default():
    from tabd.daemon.context.chunk_store import ContextOptions

    user = {f.name for f in dataclasses.fields(ContextOptions) if f.name != "max_edits"}
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(ContextOptions) if f.name in user)
    assert BY_NAME["context_tokens"].default == Config().context_tokens


# -- the settings reference (docs/settings.md) ----------------------------------------------------------------------------------------


def readme_rows(name: str) -> list[list[str]]:
    """The cells of each body row of the settings reference's table marked `settings:name`, backticks and escapes dropped."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- settings:{name} -->\n(.*?)\n<!-- /settings:{name} -->", text, re.S)
    assert match, f"docs/settings.md lost its settings:{name} marks"
    rows = match.group(1).split("\n")[2:]
    return [[c.strip().strip("`").replace("\\|", "|") for c in re.split(r"(?<!\\)\|", r)[1:-1]] for r in rows]


def test_the_readme_flag_tables_show_every_flag_with_its_default_and_nothing_else():
    shown = {cells[0].split(" ")[0]: cells[1].strip("`") for t in ("model", "context", "serve") for cells in readme_rows(t)}
    expected = {row.flag: "off" if row.type is bool else row.shown_default for row in CLI_SETTINGS}
    expected.update({row.spec.off_flag: "off" for row in CLI_SETTINGS if row.spec.off_flag})
    assert shown == expected


def test_the_readme_lists_every_initialization_option_with_its_default_and_nothing_else():
    shown = {cells[0]: cells[2].strip("`") for cells in readme_rows("init")}
    expected = {key: row.spec.shown or ("none" if row.default is None else json.dumps(row.default))
                for key, row in CLIENT_OPTIONS.items()}
    assert shown == expected


def test_the_readme_tables_are_written_from_the_table():
    text = README.read_text(encoding="utf-8")
    assert with_tables(text) == text, "run: .venv/bin/python -m tabd.daemon.runtime.readme_tables docs/settings.md"


def test_the_client_s_exclude_globs_add_to_the_flag_s_and_a_string_is_refused():
    config = config_from_args(parse("serve", "--exclude", "*.log", "--exclude", "build/**"))
    assert config.exclude == ("*.log", "build/**")
    assert flags_of(parse("replay", "--exclude", "*.log")) == ["--exclude", "*.log"]
    added, problems = apply_client_options(config, {"exclude": ["*.tmp"]})
    assert added.exclude == ("*.log", "build/**", "*.tmp") and problems == []
    kept, problems = apply_client_options(config, {"exclude": "*.tmp"})
    assert kept == config and problems == ["option 'exclude' must be a list of strings, got '*.tmp'; ignored"]
