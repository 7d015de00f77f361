"""Services: orchestrate clients, the store and the pure domain for one use case each."""
