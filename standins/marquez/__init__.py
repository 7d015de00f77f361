"""A Marquez 0.51 API stand-in (server.py): state, views and the OpenLineage events it ingests."""
