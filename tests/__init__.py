"""The tests, by capability (tests/<capability>/), plus the groups that need a real Airflow, Spark
or browser; helpers in tests/support/."""
