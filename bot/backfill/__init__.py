"""Backfills: `/backfill`'s plans, options, approvals, pauses and cancels, and running them.

rules/     states and their groupings (states.py: the one home of OPEN, ACTIVE, FINAL),
           what runs next (progress.py), which runs a `--rerun` redoes and what a DAG's
           params say of a conf (options.py), who sees a request from where (visibility.py),
           what a Retry reruns (retry.py), the status view (status.py), typed outcomes
store/     requests and steps (models.py, repository.py), the runner's bookkeeping
           (execution.py), pause/resume/schedule moves (control.py), hand-off guards, a
           request as a parent of Slack rows (parent.py)
messages/  previews, status, denials (backfill.py), the Review plan modal (options_form.py),
           progress, other teams' notices, the words for every outcome (answers.py)
run/       the runner and its backends: Airflow 3, Airflow 2, local Spark, manual; when a
           request waits or pauses by itself (holds.py)
service/   preview, approve, cancel, status (backfills.py), pause and resume (control.py),
           Review plan (revise.py), plan checks, lookup by id, Retry, team notices, what
           other capabilities read (requests.py)
"""
