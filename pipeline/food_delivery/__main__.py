"""`python -m pipeline.food_delivery`: see pipeline/food_delivery/cli.py."""

from __future__ import annotations

import sys

from pipeline.food_delivery.cli import main
from pipeline.food_delivery.session import stop_shared_session

if __name__ == "__main__":
    code = main()
    stop_shared_session()
    sys.exit(code)
