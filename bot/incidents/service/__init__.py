"""The incident use cases: watch, alert, notify, act on clicks, escalate."""
