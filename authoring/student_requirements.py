"""The students' install, written from pyproject.toml: ``requirements-student.txt`` (the
file to hand out) from the optional-dependency group ``student``, and the Python versions
the notebooks are tested on and graded with (``[tool.attention-kit] student-python``).

Usage, from the repository root::

    python -m authoring.student_requirements           # write requirements-student.txt
    python -m authoring.student_requirements --check   # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
REQUIREMENTS = ROOT / "requirements-student.txt"
GROUP = "student"
# The line of requirements-student.txt that names the Python versions, as "# Python: 3.11, 3.12".
PYTHON_LINE = "# Python: "


def _pyproject(path: Path = PYPROJECT) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def student_pins(path: Path = PYPROJECT) -> list[str]:
    """The pins of the optional-dependency group ``student`` of ``path``, in its order
    (``["jupyterlab==4.6.6", ...]``).

    Raises:
        OSError: ``path`` cannot be read.
        KeyError: it has no group ``student``.
        ValueError: a pin of the group is not ``name==version`` or differs from the
            version of the same package in ``dependencies`` (one version of everything).
    """
    project = _pyproject(path)["project"]
    kit = {pin.split("==")[0].lower(): pin for pin in project["dependencies"]}
    pins = list(project["optional-dependencies"][GROUP])
    for pin in pins:
        name = pin.split("==")[0].lower()
        if "==" not in pin:
            raise ValueError(f"{path.name}: {pin!r} of [{GROUP}] is not pinned as name==version")
        if name in kit and kit[name] != pin:
            raise ValueError(f"{path.name}: [{GROUP}] pins {pin}, dependencies {kit[name]}")
    return pins


def student_python(path: Path = PYPROJECT) -> list[str]:
    """The Python versions (``"3.11"``) the notebooks are tested on and graded with,
    oldest first: ``[tool.attention-kit] student-python`` of ``path``.

    Raises:
        OSError, KeyError: as ``student_pins``.
    """
    versions = _pyproject(path)["tool"]["attention-kit"]["student-python"]
    return sorted(versions, key=lambda v: tuple(int(part) for part in v.split(".")))


def requirements_text(path: Path = PYPROJECT) -> str:
    """The text of ``requirements-student.txt``: a header, then one pin a line."""
    versions = ", ".join(student_python(path))
    header = [
        "# What a student installs to work on the kit's notebooks (attention and training) in",
        "# JupyterLab and press Validate: `python -m pip install -r requirements-student.txt`,",
        "# with the Python the notebooks are tested on and graded with (the line below; the",
        "# notebooks' first cell checks the kernel's).",
        "# Written from pyproject.toml's group [student] by python -m authoring.student_requirements:",
        "# do not edit it by hand.",
        f"{PYTHON_LINE}{versions}",
    ]
    return "\n".join(header + student_pins(path)) + "\n"


def python_of_requirements(path: Path = REQUIREMENTS) -> list[str]:
    """The Python versions that the line ``# Python: ...`` of ``path`` (a
    requirements-student.txt) names, oldest first.

    Raises:
        OSError: ``path`` cannot be read.
        ValueError: it has no such line.
    """
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(PYTHON_LINE):
            return [v.strip() for v in line.removeprefix(PYTHON_LINE).split(",") if v.strip()]
    raise ValueError(f"{path.name}: no line {PYTHON_LINE!r}: run python -m "
                     "authoring.student_requirements")


def main(argv: list[str] | None = None) -> int:
    """Write (or, with ``--check``, compare) ``requirements-student.txt``; 0 when done or
    up to date, 1 when stale."""
    parser = argparse.ArgumentParser(prog="python -m authoring.student_requirements",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = requirements_text()
    current = REQUIREMENTS.read_text(encoding="utf-8") if REQUIREMENTS.is_file() else None
    if current == text:
        return 0
    if args.check:
        print(f"{REQUIREMENTS.name} is stale: run python -m authoring.student_requirements",
              file=sys.stderr)
        return 1
    REQUIREMENTS.write_text(text, encoding="utf-8")
    print(f"wrote {REQUIREMENTS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
