"""Stand-ins of the sinks beyond Slack: PagerDuty's Events API, a webhook receiver, Teams."""
