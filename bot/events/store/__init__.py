"""The run-event log (a shared ledger: incidents, SLA and lineage read it) and poll cursors."""
