"""Rebuild every generated file of the course, in the order they depend on each other.

1. ``source/attention/attention.ipynb`` from ``notebooks/attention.py`` and
   ``solutions/attention.py`` (``authoring/build_notebooks.py``); in a course in another
   language than English, beside it ``kit_messages.mo``, the catalogue of the messages of
   the notebooks' code (the visible tests, the Validate helpers, the gate) in that
   language, from the kit's gettext catalogue (``authoring.i18n.kernel_catalogue``), which
   step 2 writes beside the training notebook too and nbgrader releases with each;
2. ``source/training/training.ipynb`` from ``notebooks/training.py`` and
   ``solutions/training.py`` (``authoring/build_training_notebook.py``); its gate holds the
   SHA-256 of the attention notebook's setup and visible-test cells, so it is rebuilt after
   step 1 wrote them;
3. ``release/attention/`` and ``release/training/``: what ``nbgrader generate_assignment``
   makes of each source, run in a temporary copy of the course (its own gradebook: the
   instructor's ``gradebook.db`` is neither read nor written);
4. ``example/submitted/``, the example class, written from the attention release
   (``authoring/make_submissions.py``).

The notebooks are written in the course's language, ``c.AttentionKit.language`` of
``nbgrader_config.py`` (``"en"``, the default, or ``"it"``): steps 1 and 2 read
``notebooks/<assignment>.py`` in English, ``notebooks/it/<assignment>.py`` in Italian, a
translation that must have the English document's cells exactly
(``authoring/notebook_language.py``), or the build stops naming the cell. Any other value of the
setting stops the build before anything is written. In an English course each translation
is still compared with the English documents, and one out of step is reported (it would
stop the build of a course in that language), without failing the build.

With ``--check`` nothing is written: each step compares what it would write from the
committed files it reads with the committed result, and the command exits 1 naming every
stale file. Every step current means the whole chain is.

Usage, from the repository root::

    python -m tools.build_all           # rebuild what is stale, say what was written
    python -m tools.build_all --check   # exit 1 if anything is stale
"""

from __future__ import annotations

import argparse
import functools
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TextIO

from authoring import build_notebooks, build_training_notebook
from authoring import make_submissions
from authoring.notebook_language import (DEFAULT_LANGUAGE, LANGUAGES, check_same_structure,
                                         course_language, document_path)
from authoring.notebook_cells import KERNEL_CATALOGUE
from grader_tests.config import nbgrader_env

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = ("attention", "training")
# What nbgrader's generate_assignment may take some minutes for, on a loaded machine.
NBGRADER_TIMEOUT = 600


class Stale(Exception):
    """A step cannot run: its input is missing or nbgrader failed."""


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder``, by path relative to it, with its bytes."""
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def generated_release(assignment: str, scratch: Path) -> dict[str, bytes]:
    """The files ``nbgrader generate_assignment ASSIGNMENT --force`` writes from the
    committed ``source/ASSIGNMENT/``, in a course of its own under ``scratch``.

    Returns:
        path relative to ``release/ASSIGNMENT/`` -> bytes.

    Raises:
        Stale: if nbgrader fails (its output's last lines in the message).
    """
    course = scratch / assignment
    course.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "source" / assignment, course / "source" / assignment,
                    ignore=shutil.ignore_patterns(".hypothesis", ".ipynb_checkpoints",
                                                  "__pycache__"))
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment,
                           "--force"], cwd=course, env=nbgrader_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=NBGRADER_TIMEOUT,
                          check=False)
    if done.returncode != 0:
        raise Stale(f"nbgrader generate_assignment {assignment} failed (exit "
                    f"{done.returncode}):\n{done.stdout[-3000:]}")
    return _files(course / "release" / assignment)


def kernel_files(language: str) -> dict[str, bytes | None]:
    """The files shipped beside each source notebook for its code's messages, by name:
    in a course in another language than English, the catalogue of the notebooks' code
    (``authoring.i18n.kernel_catalogue``); in English none (None: the file must not be there).

    Raises:
        ValueError: a message of the notebooks' code is not translated into ``language``.
    """
    if language == DEFAULT_LANGUAGE:
        return {KERNEL_CATALOGUE: None}
    from authoring.i18n import kernel_catalogue  # (Babel: only for a translated course)

    return {KERNEL_CATALOGUE: kernel_catalogue(language)}


def step_notebook(module: ModuleType, check: bool) -> list[str]:
    """Step 1 or 2: a builder's notebook, and beside it the catalogue of its code's
    messages (``kernel_files``). Returns the stale (check) or written paths, a file to
    delete included."""
    path = module.NOTEBOOK
    wanted: dict[Path, bytes | None] = {path: module.render()}
    for name, data in kernel_files(course_language(ROOT)).items():
        wanted[path.parent / name] = data
    changed = []
    for target, expected in wanted.items():
        if (expected is None and not target.exists()) or \
                (expected is not None and target.exists() and target.read_bytes() == expected):
            continue
        if not check:
            if expected is None:
                target.unlink()
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(expected)
        changed.append(str(target.relative_to(ROOT)))
    return changed


def step_release(assignment: str, check: bool, scratch: Path) -> list[str]:
    """Step 3: ``release/ASSIGNMENT/``. Returns the stale (check) or written paths, a file
    to delete included."""
    folder = ROOT / "release" / assignment
    fresh, committed = generated_release(assignment, scratch), _files(folder)
    differ = sorted(name for name in set(fresh) | set(committed)
                    if fresh.get(name) != committed.get(name))
    if not check:
        for name in differ:
            path = folder / name
            if name in fresh:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(fresh[name])
            else:
                path.unlink()
    return [str((folder / name).relative_to(ROOT)) for name in differ]


def step_submissions(check: bool) -> list[str]:
    """Step 4: the example class. Returns the stale (check) or written paths."""
    stale = make_submissions.stale()
    if not check:
        texts = make_submissions.build()
        for student in stale:
            path = make_submissions.path_of(student)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(texts[student], encoding="utf-8")
    return [str(make_submissions.path_of(s).relative_to(ROOT)) for s in stale]


def run(check: bool, out: TextIO = sys.stdout) -> int:
    """Run the four steps in order, printing one line per step (and per stale or written
    file) to ``out``.

    Returns:
        exit status: 1 if ``check`` found a stale file or a step failed, else 0.
    """
    started = time.perf_counter()
    changed: list[str] = []
    failed = False
    try:
        language = course_language(ROOT)
    except ValueError as exc:
        print(f"FAILED: {exc}", file=out)
        return 1
    print(f"language of the notebooks: {language} (c.AttentionKit.language)", file=out)
    for other in LANGUAGES:
        if other in (DEFAULT_LANGUAGE, language):
            continue
        for assignment in ASSIGNMENTS:
            try:
                check_same_structure(document_path(assignment, DEFAULT_LANGUAGE),
                                     document_path(assignment, other))
            except (ValueError, OSError) as exc:
                print(f"note: the {other!r} translation is out of step with the English "
                      f"documents (a course in {other!r} would not build): {exc}", file=out)
    with tempfile.TemporaryDirectory(prefix="build_all_") as scratch:
        steps: list[tuple[str, Callable[[], list[str]]]] = [
            ("source/attention/", functools.partial(step_notebook, build_notebooks, check)),
            ("source/training/", functools.partial(step_notebook, build_training_notebook, check))]
        steps += [(f"release/{a}/", functools.partial(step_release, a, check, Path(scratch)))
                  for a in ASSIGNMENTS]
        steps += [("example/submitted/", functools.partial(step_submissions, check))]
        for label, step in steps:
            try:
                paths = step()
            except (Stale, ValueError, OSError) as exc:
                print(f"{label}: FAILED: {exc}", file=out)
                failed = True
                if check:
                    continue
                print("the later steps would build on it: stopped.", file=out)
                break
            word = "stale" if check else "wrote"
            print(f"{label}: {'up to date' if not paths else f'{len(paths)} {word}'}", file=out)
            for path in paths:
                print(f"  {word}: {path}", file=out)
            changed += paths
    seconds = time.perf_counter() - started
    if failed:
        print(f"a step failed ({seconds:.0f} s).", file=out)
    elif check and changed:
        print(f"{len(changed)} file(s) stale ({seconds:.0f} s): run `python -m tools.build_all` "
              "and commit the result.", file=out)
    elif check:
        print(f"everything is up to date ({seconds:.0f} s).", file=out)
    else:
        print(f"{len(changed)} file(s) written ({seconds:.0f} s).", file=out)
    return 1 if failed or (check and changed) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module's docstring); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tools.build_all",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming every file that is stale")
    return run(parser.parse_args(argv).check)


if __name__ == "__main__":
    sys.exit(main())
