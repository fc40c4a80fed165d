"""The evidence scan reads a reach however it is spelled: ``getattr(m, "x")``,
``setattr``, ``delattr``, ``importlib.import_module("x")``, ``__import__("x")``,
``vars(m)["x"]``, ``m.__dict__["x"]``, strings joined or added from constants, f-strings
of constants, and names bound to a module or to its attribute through ``import ... as``,
``from ... import`` and assignment. Each respelled reach gets the flag of its plain
spelling; no submission of the honest and correct catalogues is flagged.
"""

from __future__ import annotations

import pytest

from grader_tests.evidence import findings
from tests.catalogue.correct import CORRECT
from tests.catalogue.honest import HONEST, source

# (plain spelling, respellings): each respelling must find what the plain one finds.
RESPELLED = [
    ("import os\nos.fork()", [
        'import os\ngetattr(os, "fork")()',
        'import os as o\no.fork()',
        'from os import fork as f\nf()',
        'import importlib\nimportlib.import_module("o" + "s").fork()',
        'import os\nf = os.fork\nf()',
        'import os\nvars(os)["fo" "rk"]()',
        'import os\nos.__dict__["fork"]()',
        'import os\nname = "fork"\ngetattr(os, "".join(["fo", "rk"]))()']),
    ("import os\nos.kill(1, 9)", [
        'import os\ngetattr(os, "ki" + "ll")(1, 9)',
        'import os\nm = os\nk = m.kill\nk(1, 9)',
        'm = __import__("os")\nm.kill(1, 9)']),
    ("import os\nprint(os.environ['HOME'])", [
        "import os\nprint(getattr(os, f'{\"env\"}iron')['HOME'])",
        'import os\ne = getattr(os, "getenv")\ne("HOME")']),
    ("import socket", [
        'import importlib\nimportlib.import_module("sock" + "et")',
        'import importlib as il\nil.import_module("".join(["sock", "et"]))']),
    ("import ctypes", ['__import__("ctypes")']),
    ("import subprocess", ['import importlib\nimportlib.import_module("subprocess")']),
    ("import sys\nsys.modules['x'] = None", [
        'import sys\nvars(sys)["modules"]["x"] = None',
        'import sys\ngetattr(sys, "modules")["x"] = None']),
    ("import sys\nsys.settrace(None)", ['import sys\nsetattr(sys, "settrace", None)',
                                        'import sys\ngetattr(sys, "set" + "trace")(None)']),
    ("import builtins\nbuiltins.len = None", ['import builtins\nsetattr(builtins, "len", None)',
                                              'import builtins as b\ndelattr(b, "len")']),
    ("import numpy as np\nnp.allclose = None", [
        'import numpy as np\nsetattr(np, "allclose", lambda *a, **k: True)',
        'import numpy\nsetattr(numpy, "all" + "close", None)']),
    ("p = '/course/solutions/attention.py'", [
        'p = "/".join(["", "course", "solutions", "attention.py"])',
        'p = "/course/" + "solutions" + "/attention.py"']),
]


def _without_import_call(found):
    return [f for f in found if f != "calls __import__"]


@pytest.mark.parametrize("plain,respellings", RESPELLED, ids=[p.split("\n")[-1][:30]
                                                              for p, _ in RESPELLED])
def test_each_respelled_reach_is_flagged_as_its_plain_spelling(plain, respellings):
    expected = findings(plain)
    assert expected, plain
    for code in respellings:
        found = findings(code)
        assert set(expected) <= set(found), (code, found)


def test_reading_and_writing_in_the_honest_way_stays_unflagged():
    for code in ['import os\nos.environ["OMP_NUM_THREADS"] = "1"',
                 'import numpy as np\nx = getattr(np, "exp")(1.0)',
                 'import math\nf = getattr(math, "sq" + "rt")',
                 'import numpy as np\nn = np\ny = n.tanh(0.5)',
                 'cfg = {"a": 1}\nv = vars(cfg)["a"] if False else 1',
                 'name = "soft" + "max"\nprint(f"{name}")',
                 'import importlib\nimportlib.import_module("numpy")']:
        assert findings(code) == [], code


def test_no_honest_or_correct_submission_of_the_catalogue_is_flagged():
    for entry in HONEST:
        assert findings(source(entry)) == [], entry.id
    for entry in CORRECT:
        for name, code in entry.sources.items():
            assert findings(code) == [], (entry.id, name)
