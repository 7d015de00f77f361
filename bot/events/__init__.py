"""Run events in: OpenLineage events pushed to the bot or read from Marquez, stored once.

rules/    parsing (parse.py), what a producer's event means (producers.py), the stored
          event (event.py), the late-event sweep's arithmetic (late_window.py)
store/    the run-event log and poll cursors (models.py, run_events.py, cursors.py),
          events set aside after failing (set_aside.py)
service/  the receiver (POST /api/v1/lineage), the Marquez poller, its feed reader and
          late sweep
messages  the watcher's ops notices;  cli  `backfill-bot events list|retry`
"""
