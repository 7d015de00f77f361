"""Pure domain logic: lineage graphs, impact, schedules and backfill planning. No I/O here."""
