"""The hub's pure rules: routing and subscriptions."""
