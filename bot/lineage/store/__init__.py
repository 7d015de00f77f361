"""bot.lineage.store."""
