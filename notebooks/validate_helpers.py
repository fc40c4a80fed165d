## Given code both notebooks share: the Validate helpers of the attention notebook's setup
## cell and of the training notebook's gate. The builders insert this file, less these
## `##` lines, where a document says `# {{ validate_helpers }}` (the gate through
## authoring/build_training_notebook.py's gate_source), with the three `{{ ... }}` values filled in.
# The messages of these cells in the course's language: the catalogue kit_messages.mo that
# the kit ships beside the notebook in a course that is not in English (without it, the
# messages as written here).
try:
    with open({{ kernel_catalogue }}, "rb") as _catalogue:
        MESSAGES = gettext.GNUTranslations(_catalogue)
except Exception:  # noqa: BLE001 (no catalogue, or not one)
    MESSAGES = gettext.NullTranslations()


def tr(message, **fields):
    """``message`` in the course's language, its ``{field}`` places filled from ``fields``."""
    return MESSAGES.gettext(message).format(**fields)


# How the visible checks of each graded part last ended, by name: None when they passed,
# else the message they stopped with. The check cells (before the hidden checks) read it,
# so that Validate fails where a visible test fails.
VISIBLE_CHECKS = {}
# The kind of exception they stopped with, by name (a stub's NotImplementedError, an
# exercise's NotAnswered), so that the summary tells a part not written yet from one that fails.
VISIBLE_STOPPED_BY = {}
GRADED_PARTS = {{ graded_parts }}  # every graded part, in the notebook's order
# The modules your notebook is graded with: Python's standard library and these.
GRADING_MODULES = {{ grading_modules }}


# The Python versions the notebooks are tested on and graded with (requirements-student.txt).
STUDENT_PYTHON = {{ student_python }}
_running = "%d.%d" % sys.version_info[:2]
if sys.version_info[:2] < tuple(int(part) for part in STUDENT_PYTHON[0].split(".")):
    raise RuntimeError(tr(
        "This kernel runs Python {running}; the course's notebooks need Python {supported}. "
        "Install requirements-student.txt in a Python {supported} environment and choose its "
        "kernel (Kernel > Change Kernel).", running=_running, supported=", ".join(STUDENT_PYTHON)))
if _running not in STUDENT_PYTHON:
    print(tr("Note: this kernel runs Python {running}, and your notebook is graded with Python "
             "{supported}: code that only a newer Python accepts (for example an f-string that "
             "reuses its own quotes, new in 3.12) is a syntax error when graded.",
             running=_running, supported=", ".join(STUDENT_PYTHON)), file=sys.stderr)


@contextlib.contextmanager
def time_limit(seconds, lesson=False):
    """Stop the code inside the ``with`` block once it has used ``seconds`` of processor time.

    Processor time of the main thread (where a notebook kernel runs your cells), not the
    time on the clock: a busy machine (other programs, the other users of a JupyterHub)
    slows correct code down without making it use more processor time, so it is not
    stopped for that, while a loop that never ends uses processor time all along. Past the
    limit it raises TimeoutError; with ``lesson=True`` (the cells of *The lesson, live*,
    which carry no points) it prints the same message instead and the cell ends there, so
    that Run All goes on to the exercises below. Acts in the main thread of a POSIX
    process; anywhere else it does nothing.
    """
    main = threading.main_thread()
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not main:
        yield
        return
    try:
        clock = time.pthread_getcpuclockid(main.ident)
    except (AttributeError, OSError):
        clock = time.CLOCK_PROCESS_CPUTIME_ID  # no clock of one thread (macOS): the process's
    started = time.clock_gettime(clock)
    state = {"active": True, "fired": False}
    done = threading.Event()

    def watch():
        while not done.wait(0.05):
            if time.clock_gettime(clock) - started > seconds:
                state["fired"] = True
                signal.pthread_kill(main.ident, signal.SIGALRM)
                return

    def on_limit(signum, frame):
        if state["fired"] and state["active"]:
            state["active"] = False
            raise TimeoutError(tr(
                "this code used more than {seconds} s of processor time. If the machine is "
                "busy, run the cell again later; if it stops again, is there a loop that "
                "never ends?", seconds=seconds))
        if callable(previous):
            previous(signum, frame)  # an outer time_limit's alarm

    previous = signal.signal(signal.SIGALRM, on_limit)
    watcher = threading.Thread(target=watch, name="time_limit", daemon=True)
    watcher.start()
    try:
        yield
    except TimeoutError as exc:
        if not (lesson and state["fired"]):
            raise
        print(tr("{error}\nThis lesson cell stopped there (it carries no points); the cells "
                 "below run as usual.", error=exc), file=sys.stderr)
    finally:
        state["active"] = False
        done.set()
        watcher.join()
        signal.signal(signal.SIGALRM, previous)


class NotAnswered(AssertionError):
    """Raised by an exercise's visible checks while one of its answers is not assigned."""


@contextlib.contextmanager
def visible_checks(name, seconds=5):
    """Run a visible-test block under ``time_limit(seconds)`` and remember in
    ``VISIBLE_CHECKS[name]`` whether it passed (the message of a failed check once, with
    the exception's name only when it is not an AssertionError)."""
    __tracebackhide__ = True
    VISIBLE_CHECKS[name] = tr("they did not finish")
    VISIBLE_STOPPED_BY.pop(name, None)
    try:
        with time_limit(seconds):
            yield
    except BaseException as exc:
        said = str(exc).strip()
        VISIBLE_CHECKS[name] = said if isinstance(exc, AssertionError) and said else \
            f"{type(exc).__name__}: {exc}"
        VISIBLE_STOPPED_BY[name] = type(exc)
        raise
    VISIBLE_CHECKS[name] = None


def returned(value, name, *parts):
    """``value``, what the function ``name`` returned, as a tuple of ``len(parts)`` values
    (``parts`` names them, e.g. ``"Y", "weights"``); raises AssertionError, saying which
    tuple is expected, when it is anything else (one array, a tuple of another length)."""
    __tracebackhide__ = True
    if isinstance(value, (tuple, list)) and len(value) == len(parts):
        return tuple(value)
    if isinstance(value, (tuple, list)):
        got = tr("a {kind} of {count} items", kind=type(value).__name__, count=len(value))
    elif isinstance(value, np.ndarray):
        got = tr("one array of shape {shape}", shape=value.shape)
    else:
        got = tr("a value of type {kind}", kind=type(value).__name__)
    raise AssertionError(tr("{name} must return a tuple of {count} items ({parts}), got {got}",
                            name=name, count=len(parts), parts=", ".join(parts), got=got))


def uses_checked(name, user):
    """Raise AssertionError unless the visible checks of ``name``, another graded function
    that the visible checks of ``user`` call, have run and passed: a difference found
    through ``name`` could otherwise be its fault rather than ``user``'s. While ``name`` is
    still the stub, raise NotImplementedError instead, as its own checks did."""
    __tracebackhide__ = True
    if name not in VISIBLE_CHECKS:
        raise AssertionError(tr(
            "these checks of {user} use your {name}, whose own visible checks have not run: "
            "run the visible-test cell of {name} first, then this cell again.",
            user=user, name=name))
    if VISIBLE_CHECKS[name] is not None and \
            issubclass(VISIBLE_STOPPED_BY.get(name, type(None)), NotImplementedError):
        raise NotImplementedError(tr(
            "these checks of {user} use your {name}, which is still the stub: write {name} "
            "first, then run this cell again.", user=user, name=name))
    if VISIBLE_CHECKS[name] is not None:
        raise AssertionError(tr(
            "these checks of {user} use your {name}, whose own visible checks fail: fix "
            "{name} first (its visible test says what is wrong), then run this cell again.",
            user=user, name=name))


def visible_checks_summary():
    """Print one line per graded part: its visible checks passed, failed, still a stub, an
    exercise not answered yet, or not run since the setup cell."""
    def stopped_by(name, kind):
        return VISIBLE_CHECKS[name] is not None and \
            issubclass(VISIBLE_STOPPED_BY.get(name, type(None)), kind)

    stubs = [n for n in VISIBLE_CHECKS if stopped_by(n, NotImplementedError)]
    unanswered = [n for n in VISIBLE_CHECKS if stopped_by(n, NotAnswered)]
    failed = [n for n, failure in VISIBLE_CHECKS.items()
              if failure is not None and n not in stubs and n not in unanswered]
    passed = [n for n, failure in VISIBLE_CHECKS.items() if failure is None]
    not_run = [n for n in GRADED_PARTS if n not in VISIBLE_CHECKS]
    for label, names in ((tr("passed"), passed), (tr("fail"), failed),
                         (tr("still stubs"), stubs), (tr("not answered yet"), unanswered),
                         (tr("not run"), not_run)):
        print(tr("{label} ({count}): {names}", label=label, count=len(names),
                 names=", ".join(names) if names else "-"))


def _lines(text, width=80):
    """``text`` cut into lines of at most ``width`` characters (nbgrader validate cuts
    longer lines short), each of its own lines wrapped on its own: the rows of a printed
    matrix, shorter than ``width``, stay rows as they are."""
    return "\n".join(part for line in str(text).splitlines() for part in (
        [line] if len(line) <= width else textwrap.wrap(line, width, break_long_words=False)))


def unavailable_modules(fn):
    """The modules ``fn`` uses (through the notebook's globals or an import in its body)
    that the grading environment does not provide, sorted (the kit's own reference, which
    the training gate binds on the instructor's side, is not counted)."""
    found, codes, seen = set(), [fn.__code__], set()
    while codes:
        code = codes.pop()
        if code in seen:
            continue
        seen.add(code)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        modules = [i.argval for i in dis.get_instructions(code) if i.opname == "IMPORT_NAME"]
        for global_name in code.co_names:
            value = globals().get(global_name)
            module = value.__name__ if isinstance(value, types.ModuleType) else \
                getattr(value, "__module__", None)
            # (a function whose module was never imported was defined by a notebook's
            # own code: the training gate loads the attention notebook's functions so)
            if isinstance(module, str) and (isinstance(value, types.ModuleType)
                                            or module in sys.modules):
                modules.append(module)
        for module in modules:
            top = str(module).split(".")[0]
            if top and top not in sys.stdlib_module_names and top not in GRADING_MODULES \
                    and top not in ("__main__", "builtins", "solutions"):
                found.add(top)
    return sorted(found)


def before_grading(name, *args, answers=()):
    """Why the part ``name`` cannot pass yet, or None: a function missing or still the
    stub, one that uses a module the grading environment lacks, an exercise answer not
    assigned, or visible checks that failed (or were not run) since the setup cell.

    For a function, ``args`` are small arguments to call it with (it is still the stub if
    it raises NotImplementedError; anything else it does is for the hidden checks to
    judge). For an exercise, ``answers`` names its answer variables.
    """
    if not answers:
        fn = globals().get(name)
        if not callable(fn):
            return tr("{name} is not defined:", name=name) + "\n" + _lines(tr(
                "the notebook has no function named {name} (deleted or renamed?); names "
                "are case-sensitive.", name=name))
        quiet = io.StringIO()
        try:
            with time_limit(2), contextlib.redirect_stdout(quiet), \
                    contextlib.redirect_stderr(quiet), warnings.catch_warnings(), \
                    np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                fn(*args)
        except NotImplementedError:
            return tr("{name} is still the stub.", name=name)
        except BaseException:
            pass
        missing = unavailable_modules(fn)
        if missing:
            return (tr("{name} uses {modules}, missing when graded:", name=name,
                       modules=", ".join(missing)) + "\n" + _lines(tr(
                "the grading environment provides Python's standard library and "
                "{modules} only, so {name} would fail there.",
                modules=", ".join(GRADING_MODULES), name=name)))
    else:
        missing = [v for v in answers if v not in globals()]
        if missing:
            return tr("{name}: not answered yet.", name=name) + "\n" + _lines(
                tr("Assign {names} in the answer cell.", names=", ".join(missing)))
    if name not in VISIBLE_CHECKS:
        return tr("the visible checks of {name} have not run:", name=name) + "\n" + _lines(
            tr("run the notebook from the top (Kernel > Restart Kernel and Run All Cells)."))
    if VISIBLE_CHECKS[name] is not None:
        return (tr("the visible checks of {name} fail:", name=name) + "\n"
                + _lines(VISIBLE_CHECKS[name]))
    return None
