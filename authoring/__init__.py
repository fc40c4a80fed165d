"""The course's authoring: what an instructor runs to make the course's files, never at
grading time.

* ``notebook_cells``, ``notebook_language``: the notebooks' documents (``notebooks/``, one
  jupytext percent document per assignment and language) read as nbgrader cells, and the
  languages a course may be in;
* ``build_notebooks``, ``build_training_notebook``: the instructor notebooks
  ``source/<assignment>/`` built from those documents and the reference solutions;
* ``make_submissions``: the example class ``example/submitted/`` from the attention release;
* ``i18n``: the kit's gettext message catalogues (extract, update, compile, check);
* ``build_all``: all of the above, in the order they depend on each other.

Its modules read the reference solutions (``solutions``): the jail hides this package from
graded code as it hides ``solutions`` (``grader_tests.jail.kit_packages``). The commands
are ``python -m tools.build_all``, ``python -m tools.i18n`` and
``python -m tools.make_submissions`` (``tools/``), and ``python -m
authoring.build_notebooks`` / ``authoring.build_training_notebook`` for one notebook.
"""
