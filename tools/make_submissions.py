"""The example class ``example/submitted/``: the command line of
``authoring.make_submissions`` (its docstring tells who the students are).

Usage, from the repository root (``python -m tools.build_all`` runs it as its last step)::

    python -m tools.make_submissions            # (re)write example/submitted/<student>/...
    python -m tools.make_submissions --check    # exit 1 if the committed class is stale
"""

import sys

from authoring.make_submissions import main

if __name__ == "__main__":
    sys.exit(main())
