"""The Slack edge's I/O: the sender, the HTTP entry, Socket Mode, the client."""
