"""Lineage: which DAGs read what a DAG writes, and the plans and impacts made from it.

rules/    the graph and its walk (graph.py, dag_graph.py, walk.py), the planner,
          schedules, date ranges, the impact snapshot, run-duration history
store/    the local lineage index's tables and writes, run history
service/  the Marquez catalog and crawl planner (planning.py), the local index, its
          planner and reconcile, what run events teach it (record.py)
messages  the CLI's `plan` and `impact` text
"""
