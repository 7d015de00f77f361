"""How an HTTP service URL from the settings (MARQUEZ_URL, AIRFLOW_URL, SLACK_API_URL) may be
shown in a message, a log line, doctor's table or /readyz: without the user and password it may
carry for basic auth (`http://bot:pw@marquez:5000` is a valid MARQUEZ_URL)."""

from __future__ import annotations

from yarl import URL

__all__ = ["display_url"]


def display_url(url: str | URL) -> str:
    """`url` without its user info: `http://bot:s3cret@marquez:5000/api` →
    `http://marquez:5000/api`; the rest (path, query) is kept as given.

    Never raises: a value that does not parse as an absolute URL still loses everything up to
    the last `@` of its authority, since the text before it may be a password.
    """
    try:
        parsed = url if isinstance(url, URL) else URL(url)
        if parsed.absolute:
            return str(parsed.with_user(None))
    except (TypeError, ValueError):
        pass
    scheme, sep, rest = str(url).partition("://")
    if not sep:
        return str(url) if "@" not in str(url) else "…@" + str(url).rpartition("@")[2]
    # The authority ends at the first /, ? or #; a password may hold none of them unencoded.
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    return f"{scheme}://{authority.rpartition('@')[2]}{tail}"
