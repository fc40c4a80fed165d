"""The kit's message catalogues: the command line of ``authoring.i18n`` (its docstring
tells what each command does).

Usage, from the repository root::

    python -m tools.i18n extract   # print the template of every marked message
    python -m tools.i18n update    # the .po gains the new msgids (empty) and loses the old
    python -m tools.i18n compile   # writes the .mo
    python -m tools.i18n check     # exit 1, naming what is stale or untranslated
"""

import sys

from authoring.i18n import main

if __name__ == "__main__":
    sys.exit(main())
