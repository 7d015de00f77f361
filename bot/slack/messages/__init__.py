"""What every message shares: escaping, clipping, one render checked against Slack's limits."""
