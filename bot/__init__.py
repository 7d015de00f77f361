"""backfill-bot: plans and drives lineage-aware backfills of Airflow DAGs from Marquez, in Slack."""
