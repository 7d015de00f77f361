"""Incidents: a failed DAG run alerted once, grouped into outages, proposed a backfill, resolved.

rules/     the lifecycle (lifecycle.py), the proposed backfill (proposal.py), links to
           Airflow and Marquez, typed outcomes of the alert's buttons
store/     the incidents table and its queries, an alert as a parent of Slack rows
messages/  the alert and its thread (alerts.py), subscribers' notices, button answers
service/   the watcher (watcher.py), what an incident owes Slack (alerts.py) and the
           hub (notify.py), the alert's buttons (actions.py), escalation, what other
           capabilities read (queries.py)
"""
