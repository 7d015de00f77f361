"""Sinks beyond Slack: each one's wire format and the client that sends it once (base.py classifies
the answer)."""
