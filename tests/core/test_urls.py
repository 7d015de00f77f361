"""`bot.core.urls.display_url`: how MARQUEZ_URL, AIRFLOW_URL and SLACK_API_URL may be shown."""

from __future__ import annotations

import pytest
from yarl import URL

from bot.core.urls import display_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://bot:s3cret@marquez:5000", "http://marquez:5000"),
        (
            "http://bot:p%40ss@127.0.0.1:5000/api/v1/jobs?limit=1",
            "http://127.0.0.1:5000/api/v1/jobs?limit=1",
        ),
        ("https://token@slack.example.com/api/", "https://slack.example.com/api/"),
        ("http://[::1]:8080/", "http://[::1]:8080/"),
        ("http://marquez:5000", "http://marquez:5000"),
        (URL("http://bot:s3cret@airflow:8080/dags/x"), "http://airflow:8080/dags/x"),
    ],
)
def test_the_user_and_password_are_left_out(url: str | URL, shown: str) -> None:
    assert display_url(url) == shown


@pytest.mark.parametrize(
    "url", ["http://bot:s3cret@[::1", "bot:s3cret@marquez:5000", "http://bot:s3cret@host:port/x"]
)
def test_a_url_that_does_not_parse_still_loses_its_password(url: str) -> None:
    assert "s3cret" not in display_url(url)
