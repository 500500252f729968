"""Which engine URLs tabd sends prompts to unasked (daemon/runtime/url_rule.py) and the Config rule built on it."""
from __future__ import annotations

import pytest

from tabd.daemon.runtime.config import apply_client_options
from tabd.daemon.runtime.settings import Config, ConfigError
from tabd.daemon.runtime.url_rule import in_clear_text, shown_url


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080", "http://127.8.9.10", "http://localhost:11434/v1",
                                 "http://LOCALHOST", "http://[::1]:8000", "https://engine.example.com",
                                 "https://10.0.0.5:8443"])
def test_loopback_or_https_is_fine(url):
    assert not in_clear_text(url)
    assert Config(backend="openai", url=url).validate().url == url


@pytest.mark.parametrize("url", ["http://10.0.0.5:8000", "http://engine.example.com", "http://[2001:db8::1]:80",
                                 "http://0.0.0.0:8000", "HTTP://192.168.1.2"])
def test_plain_http_elsewhere_needs_the_flag(url):
    assert in_clear_text(url)
    with pytest.raises(ConfigError, match="--allow-insecure-url"):
        Config(backend="openai", url=url).validate()
    assert Config(backend="openai", url=url, allow_insecure_url=True).validate().url == url


def test_a_password_in_the_url_is_never_shown():
    assert shown_url("https://me:s3cret@engine.example.com/v1") == "https://me:***@engine.example.com/v1"
    assert shown_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
    with pytest.raises(ConfigError) as err:
        Config(url="http://me:s3cret@10.0.0.5").validate()
    assert "s3cret" not in str(err.value)


def test_a_client_cannot_set_the_url_or_lift_the_rule():
    config, problems = apply_client_options(Config(), {"url": "http://10.0.0.5", "allowInsecureUrl": True})
    assert config.url is None and not config.allow_insecure_url
    # one message names both (#41: unknown keys share one, so a thousand of them are not a thousand pop-ups)
    assert len(problems) == 1 and "'url'" in problems[0] and "'allowInsecureUrl'" in problems[0]
    assert "ignored" in problems[0]
