"""MobilityBench: route-planning agents in a replay sandbox, scored on eleven metrics (paper: MobilityBench)."""
