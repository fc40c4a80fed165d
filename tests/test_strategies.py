"""The graders' Hypothesis examples are the same in every grading process.

Hypothesis draws some examples from literal constants of the "local" modules a process
has imported; the graders' settings are derandomized so that the notebook's hidden cells,
the command line and a batch worker judge a function on the same inputs, which holds only
if no process's own modules take part in the draw (grader_tests/strategies.py).
"""

import json
import subprocess
import sys
import textwrap
from tests.helpers import ROOT


DRAW = textwrap.dedent('''
    import json, sys
    sys.path.insert(0, sys.argv[1])
    if sys.argv[2] == "with-constants":
        import many_constants  # a local module full of float literals
    import numpy as np
    from hypothesis import given
    from grader_tests import strategies as S

    seen = []

    @S.SETTINGS
    @given(x=S.float_arrays(S.array_shapes(1, 2, 1, 5), np.float64, bound=50.0))
    def draw(x):
        seen.append(x.tolist())

    draw()
    print(json.dumps(seen))
''')


def _examples(tmp_path, mode):
    done = subprocess.run([sys.executable, "-c", DRAW, str(tmp_path), mode], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_process_own_constants_do_not_change_the_graders_examples(tmp_path):
    constants = ", ".join(f"{v}.5" for v in range(-49, 50))
    (tmp_path / "many_constants.py").write_text(f"VALUES = [{constants}]\n")
    plain = _examples(tmp_path, "plain")
    steered = _examples(tmp_path, "with-constants")
    assert len(plain) == 30
    assert plain == steered, "the examples changed with the modules the process imported"
