"""`rig sweep`: models x benchmarks x modes, each cell a `rig bench` process, locally or as Ray tasks."""
