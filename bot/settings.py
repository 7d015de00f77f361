"""Process settings from environment variables, validated once at start-up.

Only `bot/cli.py` builds these (from `os.environ`); everything else receives a Settings object.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///./var/backfill-bot.db"


class SettingsError(ValueError):
    """An environment variable has an invalid value; the message names the variable."""


class Settings(BaseSettings):
    """Environment variables (names are the upper-case field names)."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True, case_sensitive=False)

    marquez_url: str = Field(default="http://localhost:5000")
    marquez_api_key: SecretStr | None = None
    marquez_namespace: str | None = None
    marquez_timeout_s: float = Field(default=10.0, gt=0, le=300)
    database_url: str = Field(default=DEFAULT_DATABASE_URL, repr=False)  # may hold a password
    bot_config: Path | None = None
    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"
    bot_host: str = "127.0.0.1"
    bot_port: int = Field(default=3000, ge=0, le=65535)
    airflow_url: str | None = None
    airflow_username: str | None = None
    airflow_password: SecretStr | None = None
    spark_master: str | None = None
    openlineage_api_key: SecretStr | None = None
    bot_executor: Literal["auto", "airflow", "spark", "manual"] = "auto"

    @property
    def executor_kind(self) -> Literal["airflow", "spark", "manual"]:
        """`auto` runs on Airflow when AIRFLOW_URL is set, else on the local Spark session."""
        if self.bot_executor != "auto":
            return self.bot_executor
        return "airflow" if self.airflow_url else "spark"

    @field_validator("marquez_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        from yarl import URL

        try:
            url = URL(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"'{value}' is not a URL ({exc})") from None
        if url.scheme not in {"http", "https"} or not url.host:
            raise ValueError(f"'{value}' is not an http(s) URL such as http://localhost:5000")
        return value.rstrip("/")

    @field_validator("airflow_url")
    @classmethod
    def _airflow_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"'{value}' is not an http(s) URL such as http://localhost:8080")
        return value.rstrip("/")

    @field_validator("slack_api_url")
    @classmethod
    def _slack_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"'{value}' is not an http(s) URL such as https://slack.com/api/")
        return value if value.endswith("/") else value + "/"

    @field_validator(
        "marquez_namespace",
        "marquez_api_key",
        "bot_config",
        "slack_bot_token",
        "slack_signing_secret",
        "slack_app_token",
        "airflow_url",
        "airflow_username",
        "airflow_password",
        "spark_master",
        "openlineage_api_key",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        # Messages show the URL through describe_url only: it may carry a password.
        from sqlalchemy.engine import make_url

        from bot.store.db import describe_url

        supported = ("sqlite:", "sqlite+aiosqlite:", "postgres://", "postgresql")
        if not value.startswith(supported):
            raise ValueError(
                f"'{describe_url(value)}' is not supported; use sqlite:///path/to/file.db or "
                "postgresql://user@host:5432/dbname"
            )
        try:
            make_url(value)
        except Exception:  # its text may quote the password (e.g. as a port that is no number)
            raise ValueError(
                f"'{describe_url(value)}' is not a valid URL (is the port a number, and are "
                "'@', ':' and '/' in the user or password %-encoded?)"
            ) from None
        return value

    @field_validator("bot_config")
    @classmethod
    def _config_exists(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"'{value}' is not a readable file")
        return value


def load_settings(environ: Mapping[str, str], **overrides: object) -> Settings:
    """Settings from an environment mapping plus explicit overrides (e.g. CLI flags)."""
    values: dict[str, object] = {
        key.lower(): value for key, value in environ.items() if key.lower() in Settings.model_fields
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        problems = []
        for item in exc.errors():
            variable = str(item["loc"][0]).upper() if item["loc"] else "settings"
            message = str(item["msg"]).removeprefix("Value error, ")
            problems.append(f"{variable}: {message}")
        raise SettingsError("; ".join(problems)) from None
