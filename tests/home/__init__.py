"""Tests of home."""
