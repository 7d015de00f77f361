"""Run events' pure rules: parsing, producers, the late-event window."""
