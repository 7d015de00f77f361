"""Where the tests find the repository and their fixtures (all inside the repository: a plain
clone runs every test)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
"""The specs and sample events the stand-ins and parsers are checked against (each folder's
SOURCE.md says where it came from), and the OpenLineage events of real producers."""
MARQUEZ_FIXTURES = FIXTURES / "marquez"
AIRFLOW_SPECS = FIXTURES / "airflow"
OPENLINEAGE_FIXTURES = FIXTURES / "openlineage"
