"""How the runner retries a step whose submission fails for a reason that may pass (the backend
unreachable, 5xx, 429, timeouts): growing, jittered pauses, then the step fails saying why."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

__all__ = ["SubmitRetry", "span"]


@dataclass(frozen=True)
class SubmitRetry:
    """How a step whose submission keeps failing (the backend unreachable, 5xx, 429, timeouts)
    is retried: the n-th failure waits `backoff_s`·2^(n-1) seconds (the poll interval when
    None; at most `max_backoff_s`; jittered down to half, so steps failing together spread out),
    and after `attempts` failed submissions, or `give_up_after_s` after the first one, the step
    fails with the last reason. Counted per step, in its state, so a restart does not reset it.
    """

    attempts: int = 8
    backoff_s: float | None = None
    max_backoff_s: float = 300.0
    give_up_after_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.max_backoff_s < 0 or self.give_up_after_s < 0:
            raise ValueError(f"invalid SubmitRetry: {self}")
        if self.backoff_s is not None and self.backoff_s < 0:
            raise ValueError(f"invalid SubmitRetry: {self}")

    def delay(self, failures: int, poll_interval_s: float) -> timedelta:
        """The pause after the `failures`-th failed submission in a row."""
        base = poll_interval_s if self.backoff_s is None else self.backoff_s
        ceiling = min(self.max_backoff_s, base * 2 ** min(failures - 1, 32))
        return timedelta(seconds=random.uniform(ceiling / 2, ceiling))


def span(seconds: float) -> str:
    """`45s`, `12 min`, `1.5 h`: how long submissions have been failing, in a reason."""
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
