"""rig: offline evaluation rig for open LLMs on geospatial and tool-calling benchmarks."""

import os

__version__ = "0.1.0"

# pydantic looks for plugins of its own in every installed distribution's entry points the first time a model class
# is built (at rig's import), and raises on any neighbour's damaged entry_points.txt (not UTF-8, a line without "="),
# which ended even `rig --help` in a traceback. rig uses no pydantic plugin: the scan is off unless the environment
# names one. (rig's own plugins are read by rig.plugins, which passes such metadata over.)
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
