from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import DEFAULT_DATABASE_URL, SettingsError, load_settings


def test_defaults_and_environment() -> None:
    settings = load_settings({"MARQUEZ_URL": "https://marquez.example.com/", "UNRELATED": "x"})
    assert settings.marquez_url == "https://marquez.example.com"
    assert settings.database_url == DEFAULT_DATABASE_URL
    assert settings.marquez_api_key is None


def test_overrides_win_and_blank_means_unset(tmp_path: Path) -> None:
    config = tmp_path / "c.yml"
    config.write_text("{}")
    settings = load_settings(
        {"MARQUEZ_URL": "http://a:5000", "MARQUEZ_NAMESPACE": " ", "BOT_CONFIG": str(config)},
        marquez_url="http://b:5000",
    )
    assert settings.marquez_url == "http://b:5000"
    assert settings.marquez_namespace is None
    assert settings.bot_config == config


def test_api_key_is_secret() -> None:
    settings = load_settings({"MARQUEZ_API_KEY": "s3cret"})
    assert settings.marquez_api_key is not None
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"MARQUEZ_URL": "localhost:5000"}, "MARQUEZ_URL: 'localhost:5000' is not an http(s) URL"),
        ({"DATABASE_URL": "mysql://x/y"}, "DATABASE_URL: 'mysql://x/…' is not supported"),
        (
            {"BOT_CONFIG": "/does/not/exist.yml"},
            "BOT_CONFIG: '/does/not/exist.yml' is not a readable file",
        ),
        ({"MARQUEZ_TIMEOUT_S": "-1"}, "MARQUEZ_TIMEOUT_S:"),
    ],
)
def test_invalid_values_name_the_variable(env: dict[str, str], expected: str) -> None:
    with pytest.raises(SettingsError) as error:
        load_settings(env)
    assert expected in str(error.value)
