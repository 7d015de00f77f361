"""Run events in: the receiver, the Marquez poller, its feed reader and late sweep."""
