"""Tests of lineage."""
