"""Tests of airflow."""
