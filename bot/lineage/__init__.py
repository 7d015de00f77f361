"""bot.lineage."""
