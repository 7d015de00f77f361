"""Tests of backfill."""
