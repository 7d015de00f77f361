"""The local lineage index (jobs, datasets, DAG runs), in the caller's transaction."""
