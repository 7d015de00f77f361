"""The hub's use cases: routing events, subscriptions, delivering to sinks."""
