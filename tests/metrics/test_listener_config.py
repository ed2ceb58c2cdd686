"""metrics.listener: its URL form and its errors."""

import pytest

from odradek.config import BrokerConfig, ConfigError, parse_metrics_listener


@pytest.mark.parametrize("url, expected", [
    ("http://127.0.0.1:9644", ("127.0.0.1", 9644)),
    ("http://127.0.0.1:9644/metrics", ("127.0.0.1", 9644)),
    ("http://:9644/", ("", 9644)),
    ("http://[::1]:0", ("::1", 0)),
])
def test_listener_urls(url, expected):
    assert parse_metrics_listener(url) == expected


@pytest.mark.parametrize("url", ["127.0.0.1:9644", "https://127.0.0.1:9644", "http://127.0.0.1",
                                 "http://127.0.0.1:70000", "http://127.0.0.1:x", "http://h:1/other", "nonsense"])
def test_bad_listener_urls_name_the_setting(url):
    with pytest.raises(ConfigError, match=r"^metrics\.listener: expected http://host:port"):
        BrokerConfig({"metrics.listener": url})


def test_off_by_default():
    assert BrokerConfig({})["metrics.listener"] == ""
