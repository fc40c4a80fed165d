"""nbgrader configuration of the example class: a course of its own beside the instructor's.

The eight fictitious students of ``make demo`` live here (``example/submitted/``, written by
``python -m tools.make_submissions``), with their own gradebook (``example/gradebook.db``),
``autograded/``, ``feedback/``, ``grades.csv`` and ``unlocked/``. Everything else is the
kit's configuration (``../nbgrader_config.py``, loaded first), and the assignment is the
kit's: ``source/`` and ``release/`` are the repository's own folders, not copies, so the
example class is always graded against the current notebook.

Run nbgrader for the example class from this folder (``cd example && nbgrader formgrader``);
``python -m tools.demo`` does. Nothing here reads or writes the instructor's ``submitted/``,
``gradebook.db`` or anything else of the repository root's course.
"""

import os

c = get_config()  # noqa: F821  (injected by traitlets when nbgrader loads this file)

HERE = os.path.dirname(os.path.abspath(__file__))
KIT = os.path.dirname(HERE)

load_subconfig(os.path.join(KIT, "nbgrader_config.py"))  # noqa: F821  (traitlets, as above)

c.CourseDirectory.course_id = "attention-kit-example"
c.CourseDirectory.root = HERE
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")
# The assignment itself: the kit's source and release folders (absolute paths, which
# nbgrader's CourseDirectory takes as they are).
c.CourseDirectory.source_directory = os.path.join(KIT, "source")
c.CourseDirectory.release_directory = os.path.join(KIT, "release")
# Its own exchange (git-ignored): releasing `training` to the example students, as the demo
# does, never reaches the instructor's exchange.
c.Exchange.root = os.path.join(HERE, "exchange")
# The language (c.AttentionKit.language) is the kit's, from ../nbgrader_config.py: the
# example class's notebooks are the kit's source and release, built in that language.
