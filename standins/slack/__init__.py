"""A Slack Web API stand-in (server.py) that also acts as people: its workspace (state.py), limits,
Socket Mode, the browser page (web.py, static/), and the terminal renderer (terminal.py,
transcript.py)."""
