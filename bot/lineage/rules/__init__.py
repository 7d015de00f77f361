"""Lineage's pure rules: graph, walk, planner, schedules, ranges, impact."""
