"""Data-quality checks of handled run events."""
