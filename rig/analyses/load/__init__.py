"""`rig load`: accuracy under load. The same seeded episodes at each concurrency level, paired against level 1.

Each level is one ordinary run (a `rig bench` run folder) made by a `rig bench --spec` process, the level's RunSpec
written as its `spec.json` as compare and sweep hand their cells theirs, so a level's engine starts clean (no KV
cache or batch state carried over from the level before) and a level that dies can be resumed like any run. Levels
share the seed, so `--limit` samples the same episodes and per-episode scores pair by (episode id, repeat): batching
changes numerics, and the paired flips show how many answers it changed (score flips, and replies whose text changed
at all).

Per level: the headline score with its CI, the paired difference and flips against level 1, TTFT and end-to-end
latency p50/p95/p99 over generations (requests), completion tokens per second of the level's wall time, and goodput
against the SLOs. A level whose episodes were never that many in flight at once (or all of them, when fewer)
does not pass: something capped it. The verdict is the highest level whose score is non-inferior to level 1 (the
lower bound of the paired CI above -margin) and where every SLO holds; "none" with the reason otherwise. A value that
was not measured is None and fails whatever needs it, never 0.
"""
