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


def test_port_from_a_paas_is_the_fallback_for_bot_port() -> None:
    assert load_settings({}).bot_port == 3000
    assert load_settings({"PORT": "8080"}).bot_port == 8080
    assert load_settings({"PORT": "8080", "BOT_PORT": "3001"}).bot_port == 3001
    assert load_settings({"PORT": " "}).bot_port == 3000  # blank is unset


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"PORT": "http"},
            "PORT: Input should be a valid integer, unable to parse string as an integer",
        ),
        ({"PORT": "70000"}, "PORT: Input should be less than or equal to 65535"),
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT: Input should be 'text' or 'json'"),
    ],
)
def test_invalid_port_and_log_format_name_the_variable(env: dict[str, str], expected: str) -> None:
    with pytest.raises(SettingsError) as error:
        load_settings(env)
    assert str(error.value) == expected


def test_log_format_defaults_to_text() -> None:
    assert load_settings({}).log_format == "text"
    assert load_settings({"LOG_FORMAT": "json"}).log_format == "json"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MARQUEZ_URL", "ftp://bot:s3cret@marquez:5000"),
        ("AIRFLOW_URL", "bot:s3cret@airflow:8080"),
        ("SLACK_API_URL", "slack://bot:s3cret@slack.example/api/"),
    ],
)
def test_a_rejected_url_is_named_without_its_password(variable: str, value: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({variable: value})
    assert variable in str(refused.value)
    assert "s3cret" not in str(refused.value)
