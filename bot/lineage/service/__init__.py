"""bot.lineage.service."""
