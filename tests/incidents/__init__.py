"""Tests of incidents."""
