"""rig: offline evaluation rig for open LLMs on geospatial and tool-calling benchmarks."""

__version__ = "0.1.0"
