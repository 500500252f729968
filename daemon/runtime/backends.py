"""Which predictor backend a Config asks for, built from typed settings; the command line's words stay here.

The predictor names a setting when one would fix an error (its exceptions' `setting`); a load error is said
again here with the flag that sets it, since the daemon is what knows the command line.
"""
from __future__ import annotations

import os

from tabd.daemon.runtime.config import Config
from tabd.predictor.backends.backend_settings import LocalSettings, RemoteSettings
from tabd.predictor.types import Backend, BackendError

# LocalSettings / RemoteSettings field -> the flag that sets it
FLAGS = {
    "model_dir": "--model", "device": "--device", "fim": "--fim", "engine": "--engine", "weights": "--weights",
    "threads": "--threads", "trust_remote_code": "--trust-remote-code", "url": "--url", "model": "--remote-model",
    "api_key": "--api-key-env", "priority": "--remote-priority",
}


def make_backend(config: Config) -> Backend:
    try:
        return _backend(config)
    except BackendError as exc:
        flag = FLAGS.get(exc.setting or "")
        if flag is None:
            raise
        raise type(exc)(f"{exc} ({flag})", exc.setting) from None


def _backend(config: Config) -> Backend:
    if config.backend == "openai":
        from tabd.predictor.backends.remote import RemoteBackend

        return RemoteBackend(remote_settings(config))
    if config.backend == "copy":
        from tabd.predictor.text.lookup import CopyBackend

        return CopyBackend()
    from tabd.predictor.backends.local import LocalBackend

    return LocalBackend(local_settings(config))


def local_settings(config: Config) -> LocalSettings:
    return LocalSettings(
        model_dir=config.model,
        device=config.device,
        fim=config.fim,
        engine=config.engine,
        weights=config.weights,
        threads=config.threads,
        trust_remote_code=config.trust_remote_code,
        kv_reuse=config.kv_reuse,
        max_prompt_ms=float(config.max_prompt_ms),
        max_predict_ms=float(config.max_predict_ms),
    )


def remote_settings(config: Config) -> RemoteSettings:
    """RemoteError naming the flag to pass where the command line lacks what the remote backend needs."""
    from tabd.predictor.backends.wire import RemoteError

    if not config.url:
        raise RemoteError("--backend openai needs --url, e.g. --url http://127.0.0.1:8080")
    api_key = None
    env = config.api_key_env
    if env:
        api_key = os.environ.get(env)
        if not api_key:
            raise RemoteError(f"--api-key-env {env}: the environment variable {env} is not set or empty")
    return RemoteSettings(config.url, model=config.remote_model, fim=config.fim, api_key=api_key,
                          total_timeout=float(config.timeout), priority=config.remote_priority,
                          max_prompt_ms=float(config.max_prompt_ms), max_predict_ms=float(config.max_predict_ms))
