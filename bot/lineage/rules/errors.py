"""The one base class of "this cannot be planned" errors, so every place that plans (a preview,
an alert's impact, an SLA pass, the CLI) catches the whole family and answers in words, and a
new kind of planning failure cannot slip past one of them."""

from __future__ import annotations


class PlanningError(Exception):
    """A plan or an impact cannot be worked out; `str(error)` says why, for a user."""
