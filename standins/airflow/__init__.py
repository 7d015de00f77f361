"""An Airflow REST API stand-in (server.py): /api/v2 (Airflow 3, backfills) or /api/v1 (Airflow 2),
with simulated runs."""
