"""standins.demo."""
