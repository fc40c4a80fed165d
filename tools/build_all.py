"""Rebuild every generated file of the course, in the order they depend on each other:
the command line of ``authoring.build_all`` (its docstring tells the steps).

Usage, from the repository root::

    python -m tools.build_all           # rebuild what is stale, say what was written
    python -m tools.build_all --check   # exit 1 if anything is stale
"""

import sys

from authoring.build_all import main

if __name__ == "__main__":
    sys.exit(main())
