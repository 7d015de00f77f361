"""Slack listeners. Each module exposes `register(app, services)`; they ack, parse, call a
service in `bot/` and render. The Slack surface (issue #3) adds commands, actions and views."""
