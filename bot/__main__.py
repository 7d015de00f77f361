"""`python -m bot` is `backfill-bot`."""

from bot.cli import main

main()
