"""`python -m rig.cli`: how rig runs its own child processes (compare, sweep cells)."""

from rig.cli import main

main()
