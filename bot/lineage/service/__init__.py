"""Lineage use cases: the catalog, planners, the local index and its reconcile."""
