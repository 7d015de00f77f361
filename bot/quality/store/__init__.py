"""The tables of data quality: observations of what runs wrote, and schemas."""
