"""Pure rules of data quality."""
