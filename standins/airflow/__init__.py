"""standins.airflow."""
