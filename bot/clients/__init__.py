"""Clients for the external systems the bot talks to (Marquez, Airflow, Slack)."""
