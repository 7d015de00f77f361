"""Data quality: what COMPLETE runs wrote (row counts, schemas, assertions, lifecycle) against
each dataset's history, and the findings that open data incidents."""
