"""Whose a DAG is, and who may act on its backfills, alerts and subscriptions: rules.py (owners,
denials) and service.py (with Slack's user groups)."""
