"""Local stand-ins for external services (Marquez), shared by the tests and the demo."""
