"""The backfill use cases: load, ask the rules, store, owe; each answers with an outcome."""
