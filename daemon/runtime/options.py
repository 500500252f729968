"""Command-line flags from the settings table (runtime/settings.py), shared by serve, complete, replay and bench, and
the Config they make."""
from __future__ import annotations

import argparse
import ipaddress
from typing import Any, Iterable

from tabd.daemon.runtime.settings import CONTEXT, MODEL, SERVE, SETTINGS, Config, Setting

CLI_SETTINGS: tuple[Setting, ...] = tuple(s for s in SETTINGS if s.spec.flag)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags shared by serve, complete, replay, bench and serve-model, one group each, from the table; the
    namespace also gets the defaults of the table's other flags (serve's --log...), so that it holds every setting."""
    for group in (MODEL, CONTEXT):
        add_setting_arguments(parser.add_argument_group(group), group)
    present = {action.dest for action in parser._actions}
    parser.set_defaults(**{dest: value for row in CLI_SETTINGS for dest, value in flag_defaults(row).items()
                           if dest not in present})


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """`tabd serve`'s own settings: the files it writes (--log, --log-text, --record)."""
    add_setting_arguments(parser, SERVE)


def add_setting_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, group: str) -> None:
    for row in CLI_SETTINGS:
        if row.spec.group != group:
            continue
        spec = row.spec
        if row.type is bool:  # a switch: it sets the value that is not the default (--no-cache, --fixed-depth)
            parser.add_argument(row.flag, action="store_true", help=escaped(spec.help))
        elif row.type is tuple:  # repeatable: each use adds one value
            parser.add_argument(row.flag, action="append", default=None, metavar=spec.metavar, help=escaped(spec.help))
        else:
            parser.add_argument(row.flag, type=row.type, default=row.default, choices=spec.choices,
                                metavar=spec.metavar, help=help_of(row))
        if spec.off_flag:
            parser.add_argument(spec.off_flag, action="store_true", help=escaped(spec.off_help))


def escaped(help_text: str) -> str:
    return help_text.replace("%", "%%")  # argparse %-formats help


def help_of(row: Setting) -> str:
    """A value flag's help: the row's, then its default and bounds."""
    if row.default is None and row.spec.shown is None:
        default = ""
    else:
        default = f"default: {row.shown_default}" if row.spec.shown else f"default {row.shown_default}"
    notes = "; ".join(n for n in (default, row.span()) if n)
    return escaped(f"{row.spec.help} ({notes})" if notes else row.spec.help)


def flag_defaults(row: Setting) -> dict[str, Any]:
    """The namespace attributes a row's flags set when not given."""
    out: dict[str, Any] = {row.dest: False if row.type is bool else None if row.type is tuple else row.default}
    if row.spec.off_flag:
        out[row.off_dest] = False
    return out


def value_from_args(row: Setting, args: argparse.Namespace) -> Any:
    given = getattr(args, row.dest)
    if row.spec.off_flag and getattr(args, row.off_dest):
        return row.off_value
    if row.type is bool:
        return (not row.default) if given else row.default
    if row.type is tuple:
        return row.default + tuple(given or ())
    return given


def config_from_args(args: argparse.Namespace) -> Config:
    """The Config the flags in args say (a parser that add_model_arguments made holds every one)."""
    return Config(**{row.name: value_from_args(row, args) for row in CLI_SETTINGS}).validate()


def flags_of(args: argparse.Namespace, names: Iterable[str] | None = None) -> list[str]:
    """The shared flags (serve's own left out) that give a `tabd serve` child the settings args holds where they
    are not the defaults; names: only those settings."""
    wanted = set(names) if names is not None else None
    flags: list[str] = []
    for row in CLI_SETTINGS:
        if row.spec.group == SERVE or (wanted is not None and row.name not in wanted):
            continue
        value = getattr(args, row.dest)
        if row.type is bool:
            flags += [row.flag] if value else []
        elif row.type is tuple:
            flags += [part for item in value or () for part in (row.flag, item)]
        elif value is not None and value != row.default:
            flags += [row.flag, str(value)]
        if row.spec.off_flag and getattr(args, row.off_dest):
            flags.append(row.spec.off_flag)
    return flags


def parse_host_port(value: str, allow_remote: bool, what: str) -> tuple[str, int]:
    """HOST:PORT for a listener; a non-loopback host needs --allow-remote."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{what}: expected HOST:PORT, got {value!r}")
    host = host.strip("[]") or "127.0.0.1"
    if not allow_remote and not is_loopback(host):
        raise ValueError(f"{what}: {host} is not a loopback address; tabd listens on 127.0.0.1 unless you pass --allow-remote")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
