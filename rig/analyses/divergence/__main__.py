"""``python -m rig.analyses.divergence SETTINGS.json``: the divergence pass in a process of its own."""

import sys

from rig.analyses.divergence.run import main

sys.exit(main())
