"""Lineage to load into the Marquez stand-in: the food_delivery sample, and synthetic graphs for
property tests and benchmarks."""
