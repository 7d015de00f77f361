"""The notification hub: each event routed once, to sinks beyond Slack and subscribed channels.

rules/     routing, severity, quiet hours, escalation timing (routing.py); subscriptions
           and their outcomes (subscriptions.py)
store/     sink deliveries, sink health, subscriptions
sinks/     each sink's wire format and client: PagerDuty, webhook, e-mail, Teams
messages/  webhook documents, e-mail and Teams bodies (documents.py), digests, sink
           health notices, subscription answers
service/   the hub (hub.py), /backfill subscribe (subscriptions.py), the sink sender
"""
