"""Every word and Block Kit message of an incident."""
