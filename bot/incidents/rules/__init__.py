"""Incidents' pure rules: lifecycle, proposal, links, outcomes."""
