"""Which predictor backend a Config asks for."""
from __future__ import annotations

from tabd.daemon.runtime.config import Config
from tabd.predictor.types import Backend


def make_backend(config: Config) -> Backend:
    if config.backend == "openai":
        from tabd.predictor.remote import RemoteBackend

        return RemoteBackend.from_config(config)
    if config.backend == "copy":
        from tabd.predictor.lookup import CopyBackend

        return CopyBackend()
    from tabd.predictor.local import LocalBackend

    return LocalBackend(
        config.model,
        device=config.device,
        fim=config.fim,
        kv_reuse=config.kv_reuse,
        threads=config.threads,
        trust_remote_code=config.trust_remote_code,
        engine=config.engine,
        weights=config.weights,
    )
