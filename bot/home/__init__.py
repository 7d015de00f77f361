"""The App Home tab: the viewer's teams' open incidents, backfills under way and recent SLA
misses."""
