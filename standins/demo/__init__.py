"""`backfill-bot demo` and `chat`: the stand-ins and the real bot on loopback (run.py), the outside
world (world.py), the scripted story (story.py), the terminal chat (chat.py)."""
