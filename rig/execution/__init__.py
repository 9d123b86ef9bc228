"""Executing a run: the run spec, `rig bench`, the runner, rescoring, and the cell launcher."""
