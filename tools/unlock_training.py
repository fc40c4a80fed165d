#!/usr/bin/env python
"""The instructor's gate: release assignment `training` to the students who passed
`attention`. The command line of ``grader_tests.unlock`` (its docstring tells the options,
the exchange courses and the ledger); ``python -m grader_tests unlock`` is the same.

Usage, from the course root (the repository root)::

    python tools/unlock_training.py                      # threshold: full marks
    python tools/unlock_training.py --threshold 95%      # at least 95 % of the maximum
    python tools/unlock_training.py --collect            # collect their submissions
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the kit's packages sit beside tools/
    sys.path.insert(0, str(ROOT))

from grader_tests.unlock import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
