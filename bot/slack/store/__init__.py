"""The outbox: what the bot owes Slack, a row before it is sent."""
