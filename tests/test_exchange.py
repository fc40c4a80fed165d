"""nbgrader's exchange as the kit configures it (``nbgrader_config.py``, "The exchange"):
the whole cycle for two students, the gated release of `training` through the same
channel, and ``zip_collect`` on the file names of a Canvas download.

Each test works in a copy of the course in a temporary folder, with the course-local
exchange of ``nbgrader_config.py`` (``<course>/exchange``). Each student has a home folder
of their own, where their nbgrader reads ``~/.jupyter/nbgrader_config.py`` (the one line
pointing at the exchange, as the README tells students, and their id, which on a shared
machine or a JupyterHub is their login name) and keeps its submission cache, as in
nbgrader's own tests of the exchange.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from tests.helpers import ROOT, kit_env

COURSE_ID = "attention-kit"
# Two students of the example class: every function right, and one trap (95.2 / 100).
STUDENTS = {"alice": "student_correct", "bob": "student_mask_after_softmax"}
# What each must score (the example class's EXPECTED.json: 100 and 95.2).
EXPECTED = json.loads((ROOT / "example" / "EXPECTED.json").read_text())["students"]


def nbgrader(args: list[str], cwd: Path, env: dict | None = None, check: bool = True,
             timeout: int = 900) -> subprocess.CompletedProcess:
    """``nbgrader ARGS`` run in ``cwd``; fails the test with its output unless it succeeds
    (``check``)."""
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd,
                          env=env or kit_env(), capture_output=True, text=True, check=False,
                          timeout=timeout)
    if check:
        assert done.returncode == 0, f"nbgrader {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def make_course(tmp_path: Path) -> Path:
    """A copy of the course (sources, releases, configuration) in ``tmp_path/course``."""
    course = tmp_path / "course"
    for name in ("source/attention", "source/training", "release/attention", "release/training"):
        shutil.copytree(ROOT / name, course / name)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    return course


def make_home(tmp_path: Path, student: str, exchange: Path) -> tuple[Path, dict]:
    """``tmp_path/home/<student>`` with the student's nbgrader configuration, and the
    environment of a command the student runs there."""
    home = tmp_path / "home" / student
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        f"c = get_config()\n"
        f"c.Exchange.root = {str(exchange)!r}\n"
        f"c.CourseDirectory.student_id = {student!r}\n", encoding="utf-8")
    env = kit_env(HOME=str(home), USER=student, LOGNAME=student)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
        env.pop(name, None)
    return home, env


def run_gate(training_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Run the gate cell of ``training_dir/training.ipynb`` from that folder, as the
    student's kernel would; returns its namespace (``GateClosed`` propagates)."""
    nb = nbformat.read(training_dir / "training.ipynb", as_version=4)
    gate = next(c for c in nb.cells if c.get("id") == "gate")
    monkeypatch.chdir(training_dir)
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    namespace = {"__name__": "__main__"}
    exec(compile(gate.source, "gate", "exec"), namespace)
    return namespace


@pytest.mark.slow
def test_exchange_cycle_for_two_students_and_the_gated_release(tmp_path, monkeypatch):
    course = make_course(tmp_path)
    exchange = course / "exchange"            # nbgrader_config.py: the course-local exchange
    homes = {student: make_home(tmp_path, student, exchange) for student in STUDENTS}

    # Instructor: record the assignment, release it to the exchange.
    nbgrader(["generate_assignment", "attention", "--force"], course)
    nbgrader(["release_assignment", "attention"], course)
    assert (exchange / COURSE_ID / "outbound" / "attention" / "attention.ipynb").is_file()

    # Each student fetches it into their home, does the work (the example student's
    # notebook stands for it) and submits.
    released = (course / "release" / "attention" / "attention.ipynb").read_bytes()
    for student, example in STUDENTS.items():
        home, env = homes[student]
        nbgrader(["fetch_assignment", "attention", "--course", COURSE_ID], home, env)
        fetched = home / "attention" / "attention.ipynb"
        assert fetched.read_bytes() == released
        shutil.copy(ROOT / "example" / "submitted" / example / "attention" / "attention.ipynb", fetched)
        nbgrader(["submit", "attention", "--course", COURSE_ID], home, env)
    inbound = sorted(p.name.split("+")[0] for p in (exchange / COURSE_ID / "inbound").iterdir())
    assert inbound == sorted(STUDENTS)

    # Instructor: collect, autograde, feedback, release the feedback.
    nbgrader(["collect", "attention"], course)
    for student, example in STUDENTS.items():
        submitted = course / "submitted" / student / "attention"
        assert (submitted / "attention.ipynb").read_bytes() == \
            (ROOT / "example" / "submitted" / example / "attention" / "attention.ipynb").read_bytes()
        (handed_in,) = (exchange / COURSE_ID / "inbound").glob(f"{student}+attention+*")
        # an honest submission: its own time kept, nothing noted
        assert (submitted / "timestamp.txt").read_text() == \
            (handed_in / "timestamp.txt").read_text()
        assert not (submitted / "timestamp_note.txt").exists()
    nbgrader(["autograde", "attention", "--create"], course)
    nbgrader(["generate_feedback", "attention", "--force"], course)  # the README's
    nbgrader(["release_feedback", "attention"], course)

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gradebook:
        scores = {s: gradebook.find_submission("attention", s).score for s in STUDENTS}
    assert scores == pytest.approx({s: EXPECTED[e]["score"] for s, e in STUDENTS.items()})
    assert scores == pytest.approx({"alice": 100.0, "bob": 95.2})

    # Each student fetches their own feedback, and only their own.
    for student, example in STUDENTS.items():
        home, env = homes[student]
        nbgrader(["fetch_feedback", "attention", "--course", COURSE_ID], home, env)
        pages = list((home / "attention" / "feedback").glob("*/attention.html"))
        assert len(pages) == 1, pages
        page = pages[0].read_text(encoding="utf-8")
        assert f"{scores[student]:g} / 100" in page or f"{scores[student]:.1f} / 100" in page \
            or f"{scores[student]:.2f} / 100" in page, page[:2000]
        # the graders' report line of a failed check names its fault id (alice has none)
        assert ("[mask-after-softmax]" in page) == (student == "bob")
        assert ("  FAIL  " in page) == (student == "bob")

    # The gate of `training`, threshold full marks: alice receives it through the exchange,
    # in a course of her own, and fetches it the way she fetched `attention`; bob does not.
    env = kit_env()
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "unlock_training.py")],
                          cwd=course, env=env, capture_output=True, text=True, check=False,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "unlocked now (1)" in done.stdout and "attention scored 95.20 / 100, needs 100.00" in \
        done.stdout, done.stdout
    alice_course = f"{COURSE_ID}-training-alice"
    assert f"nbgrader fetch_assignment training --course {alice_course}" in done.stdout
    outbound = sorted(p.parent.parent.name for p in exchange.glob("*/outbound/training"))
    assert outbound == [alice_course]
    ledger = json.loads((course / "unlocked" / "unlocked.json").read_text())
    assert ledger["students"]["alice"]["exchange_course"] == alice_course
    assert "bob" not in ledger["students"]

    home, alice_env = homes["alice"]
    listed = nbgrader(["list", "--course", alice_course], home, alice_env)
    assert "training" in listed.stdout + listed.stderr
    nbgrader(["fetch_assignment", "training", "--course", alice_course], home, alice_env)
    assert (home / "training" / "training.ipynb").read_bytes() == \
        (course / "release" / "training" / "training.ipynb").read_bytes()
    home_bob, bob_env = homes["bob"]
    refused = nbgrader(["fetch_assignment", "training", "--course", f"{COURSE_ID}-training-bob"],
                       home_bob, bob_env, check=False)
    assert refused.returncode != 0 and not (home_bob / "training").exists()
    refused = nbgrader(["fetch_assignment", "training", "--course", COURSE_ID], home_bob, bob_env,
                       check=False)
    assert refused.returncode != 0 and not (home_bob / "training").exists()

    # The gate works from the folder alice got: it finds her attention notebook beside it.
    namespace = run_gate(home / "training", monkeypatch)
    namespace["require_gate"]()
    assert namespace["_gate"].open
    assert str(Path("..") / "attention" / "attention.ipynb") in namespace["_gate"].report
    # alice's folder carries the instructor's decision, which her gate opened on.
    assert json.loads((home / "training" / "released.json").read_text())["student"] == "alice"
    assert "the instructor released training to alice" in namespace["_gate"].report
    # The same folder beside bob's attention (a copy passed on) says whose decision it
    # is and lists his failing check (his submission of it is not graded: not released to
    # him); without the decision it stays closed on his trap, and without any attention
    # folder it stays closed too (never the kit's reference functions, importable here).
    shutil.copytree(home / "training", home_bob / "training")
    passed_on = run_gate(home_bob / "training", monkeypatch)["_gate"].report
    assert "released training to alice" in passed_on
    assert "  - scaled_dot_product_attention: " in passed_on
    (home_bob / "training" / "released.json").unlink()
    with pytest.raises(Exception, match="scaled_dot_product_attention") as closed:
        run_gate(home_bob / "training", monkeypatch)
    assert type(closed.value).__name__ == "GateClosed"
    shutil.rmtree(home_bob / "attention")
    with pytest.raises(Exception, match="could not find your attention notebook"):
        run_gate(home_bob / "training", monkeypatch)

    # alice submits training back to her course; the unlock command collects it.
    nbgrader(["submit", "training", "--course", alice_course], home, alice_env)
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "unlock_training.py"),
                           "--collect"], cwd=course, env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (course / "submitted" / "alice" / "training" / "training.ipynb").read_bytes() == \
        (home / "training" / "training.ipynb").read_bytes()
    assert not (course / "submitted" / "bob" / "training").exists()
    assert not (course / "submitted" / "alice" / "training" / "timestamp_note.txt").exists()
    # The same collect there: a timestamp.txt alice rewrites gives way to its change time.
    (handed_in,) = (exchange / alice_course / "inbound").iterdir()
    (handed_in / "timestamp.txt").write_text("2025-03-14 16:59:00.000000 UTC")
    shutil.rmtree(course / "submitted" / "alice" / "training")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "unlock_training.py"),
                           "--collect"], cwd=course, env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    kept = (course / "submitted" / "alice" / "training" / "timestamp.txt").read_text()
    assert not kept.startswith("2025-03-14") and kept.startswith(f"{datetime.now(timezone.utc):%Y-}")
    assert "2025-03-14 16:59:00" in (course / "submitted" / "alice" / "training" /
                                     "timestamp_note.txt").read_text()


@pytest.mark.slow  # runs nbgrader zip_collect
def test_zip_collect_files_a_canvas_download_under_each_student(tmp_path):
    """``nbgrader zip_collect attention`` on an archive named the way Canvas names a
    "download submissions" archive's files: each notebook goes to
    ``submitted/<student>/attention/attention.ipynb`` (a late one and a resubmission too);
    a file that is not a submission is skipped and the others are collected."""
    course = make_course(tmp_path)
    archive = course / "downloaded" / "attention" / "archive"
    archive.mkdir(parents=True)
    notebooks = {
        "doejane_48213_1190044_attention.ipynb": ("doejane", b'{"who": "doejane"}'),
        "smithjohn_LATE_48214_1190051_attention-1.ipynb": ("smithjohn", b'{"who": "smithjohn"}'),
    }
    with zipfile.ZipFile(archive / "submissions.zip", "w") as zf:
        for name, (_, content) in notebooks.items():
            zf.writestr(name, content)
        zf.writestr("notes_48215_1190052_readme.txt", b"not a notebook")
        zf.writestr("attention.ipynb", b'{"who": "nobody"}')       # no student in the name
    done = nbgrader(["zip_collect", "attention"], course)
    collected = sorted(str(p.relative_to(course / "submitted"))
                       for p in (course / "submitted").rglob("*.ipynb"))
    assert collected == ["doejane/attention/attention.ipynb",
                         "smithjohn/attention/attention.ipynb"], done.stdout + done.stderr
    for student, content in notebooks.values():
        assert (course / "submitted" / student / "attention" / "attention.ipynb").read_bytes() \
            == content


# --- the students' side ------------------------------------------------------------------


def _pins() -> dict[str, str]:
    """``{name: "name==version"}`` of pyproject.toml's dependencies."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {pin.split("==")[0].lower(): pin for pin in project["dependencies"]}


def test_students_install_what_the_graders_use():
    """requirements-student.txt and the README's install line for students name JupyterLab,
    NumPy, matplotlib, nbgrader and rich at exactly pyproject.toml's pins."""
    pins = _pins()
    wanted = [pins[name] for name in ("jupyterlab", "numpy", "matplotlib", "nbgrader", "rich")]
    lines = [line.strip() for line in
             (ROOT / "requirements-student.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines == wanted
    readme = (ROOT / "README.md").read_text()
    students = readme[readme.index("## For students"):]
    assert f"python -m pip install {' '.join(wanted)}\n" in students
    assert "python -m pip install -r requirements-student.txt" in students
    # and each released notebook says it whole: a student who fetched only the notebook
    # through the exchange has no requirements file
    for assignment in ("attention", "training"):
        notebook = (ROOT / "release" / assignment / f"{assignment}.ipynb").read_text()
        assert f"python -m pip install {' '.join(wanted)}`" in notebook, assignment


@pytest.mark.slow  # runs jupyter's commands
def test_the_readmes_commands_disable_the_instructor_panels(tmp_path):
    """The README's JupyterLab commands for a student's environment, run at the user level
    of a scratch Jupyter configuration (``--level=user`` for ``--level=sys_prefix``): the
    formgrader, course list and create-assignment panels end up disabled and locked, the
    assignment list and Validate not; the two server extensions it disables are nbgrader's
    instructor ones (the assignment list and Validate stay)."""
    readme = (ROOT / "README.md").read_text()
    students = readme[readme.index("## For students"):]
    block = students[students.index("```sh\njupyter labextension"):]
    commands = block[len("```sh\n"):block.index("```", 3)].strip().splitlines()
    lab = [c for c in commands if c.startswith("jupyter labextension ")]
    server = [c for c in commands if c.startswith("jupyter server extension disable --sys-prefix ")]
    assert len(lab) == 2 and len(server) == 2 and len(commands) == 4
    assert {c.split()[-1] for c in server} == {"nbgrader.server_extensions.formgrader",
                                               "nbgrader.server_extensions.course_list"}
    env = kit_env(JUPYTER_CONFIG_DIR=str(tmp_path / "config"))
    for command in lab:
        argv = command.replace("--level=sys_prefix", "--level=user").split()
        done = subprocess.run([str(Path(sys.executable).parent / argv[0]), *argv[1:]],
                              cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                              timeout=120)
        assert done.returncode == 0, command + "\n" + done.stdout + done.stderr
    page = json.loads((tmp_path / "config" / "labconfig" / "page_config.json").read_text())
    panels = {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
              "@jupyter/nbgrader:create-assignment"}
    assert set(page["disabledExtensions"]) == panels
    assert set(page["lockedExtensions"]) == panels
    listed = subprocess.run([str(Path(sys.executable).parent / "jupyter"), "labextension", "list"],
                            cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                            timeout=120)
    disabled = (listed.stdout + listed.stderr).split("Disabled extensions:")[1]
    assert "@jupyter/nbgrader:formgrader" in disabled
    assert "assignment-list" not in disabled and "validate-assignment" not in disabled


# --- the unlock command and the exchange, without nbgrader's autograde --------------------


@pytest.mark.slow  # runs nbgrader's exchange
def test_unlock_releases_through_the_exchange_and_survives_a_failed_release(tmp_path,
                                                                             gradebooks):  # noqa: F811  (the fixture)
    """unlock(..., exchange=...) releases `training` to a course of each passing student's
    own, with nbgrader's permissions (outbound readable by all, inbound writable but not
    listable); a release the exchange refuses leaves that student out of the ledger with
    the reason, the others go on, and the next run releases to them."""
    import stat
    import warnings

    from grader_tests import unlock
    from tests.helpers import release_folder, set_scores

    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the exchange should be")
    exchange = tmp_path / "exchange"
    full = unlock.parse_threshold("full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40), "bo": (60, 30)})
        newly, _, locked = unlock.unlock(gb, release, unlocked, full, exchange=blocked,
                                         course_id="course")
        assert newly == [] and [v["student"] for v in locked] == ["ada", "bo"]
        assert "but the release to the exchange" in locked[0]["reason"]
        assert locked[1]["reason"] == "attention scored 90.00 / 100, needs 100.00"
        assert not (unlocked / "unlocked.json").exists()

        newly, already, locked = unlock.unlock(gb, release, unlocked, full, exchange=exchange,
                                               course_id="course")
        assert [v["student"] for v in newly] == ["ada"] and already == []
        gb.close()
    ledger = json.loads((unlocked / "unlocked.json").read_text())
    assert ledger["students"]["ada"]["exchange_course"] == "course-training-ada"
    assert sorted(p.name for p in exchange.iterdir()) == ["course-training-ada"]
    outbound = exchange / "course-training-ada" / "outbound" / "training"
    assert (outbound / "training.ipynb").read_bytes() == (release / "training.ipynb").read_bytes()
    assert stat.S_IMODE(outbound.stat().st_mode) == 0o755
    assert stat.S_IMODE((outbound / "training.ipynb").stat().st_mode) == 0o644
    inbound = exchange / "course-training-ada" / "inbound"
    assert stat.S_IMODE(inbound.stat().st_mode) & 0o777 == 0o733


@pytest.mark.slow  # runs the unlock command on a copy of the example class
def test_unlock_run_from_the_example_class_uses_its_release_exchange_and_gradebook(
        tmp_path, new_gradebooks):
    """``python tools/unlock_training.py`` with no option, run from a copy of ``example/``:
    the gradebook, course id, release folder (the kit's ``release/training``, which
    ``example/nbgrader_config.py`` names) and exchange are the example class's, and nothing
    is written in the instructor's course beside it."""
    import warnings

    from nbgrader.api import Gradebook

    from grader_tests.batch import alembic_on_path

    alembic_on_path()
    kit = tmp_path / "kit"
    shutil.copytree(ROOT / "release" / "training", kit / "release" / "training")
    shutil.copy(ROOT / "nbgrader_config.py", kit / "nbgrader_config.py")
    example = kit / "example"
    example.mkdir()
    shutil.copy(ROOT / "example" / "nbgrader_config.py", example / "nbgrader_config.py")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Gradebook(f"sqlite:///{example / 'gradebook.db'}", "attention-kit-example") as gb:
            gb.add_assignment("attention")
            gb.add_notebook("attention", "attention")
            gb.add_grade_cell("part_a", "attention", "attention", max_score=100,
                              cell_type="code")
            for student, score in (("ada", 100), ("bo", 90)):
                gb.add_student(student)
                gb.add_submission("attention", student)
                grade = gb.find_grade("part_a", "attention", "attention", student)
                grade.auto_score, grade.needs_manual_grade = score, False
            gb.db.commit()
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "unlock_training.py")],
                          cwd=example, env=kit_env(), capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"release: {kit / 'release' / 'training'}; exchange: {example / 'exchange'}" in \
        done.stdout, done.stdout
    assert "unlocked now (1)" in done.stdout and "attention scored 90.00 / 100, needs 100.00" in \
        done.stdout, done.stdout
    released = kit / "release" / "training" / "training.ipynb"
    outbound = example / "exchange" / "attention-kit-example-training-ada" / "outbound" / \
        "training" / "training.ipynb"
    assert outbound.read_bytes() == released.read_bytes()
    assert (example / "unlocked" / "ada" / "training" / "training.ipynb").read_bytes() == \
        released.read_bytes()
    assert sorted(p.name for p in (example / "exchange").iterdir()) == \
        ["attention-kit-example-training-ada"]
    assert sorted(p.name for p in kit.iterdir()) == ["example", "nbgrader_config.py", "release"]
