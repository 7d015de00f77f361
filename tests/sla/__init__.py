"""Tests of sla."""
