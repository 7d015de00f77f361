"""What the process reports about itself: /readyz (readiness.py) and the database figures /metrics
shows (figures.py)."""
