"""The `food_delivery` example pipeline: five PySpark jobs over a Parquet warehouse.

`example.etl_orders` (daily) loads generated orders; weekly jobs derive `orders_7_days`,
`delivery_7_days`, `top_delivery_times` and `popular_orders_day_of_week` from them. Every run
reports OpenLineage events shaped like the Airflow integration's (a DAG run plus its
`spark_job` task), so Marquez shows the same lineage as the bot's `food_delivery` seed.
"""
