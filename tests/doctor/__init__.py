"""Tests of doctor."""
