"""The Slack edge, which every capability uses.

rules/     action and block ids, the `/backfill` grammar (commands.py)
store/     the outbox (models.py, outbox.py: a shared ledger every capability owes
           messages to) and the parents rows hang off (parents.py)
messages/  escaping, clipping and the one render (render.py), Slack's limits, the shared
           notice (common.py) and the ops notice's shape (ops.py)
service/   the sender (the one place that posts), POST /slack/events, Socket Mode, call
           counting, the client, user groups
"""
