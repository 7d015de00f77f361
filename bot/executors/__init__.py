"""Executors run approved backfills: the protocol in `base`, implementations beside it."""
