"""`python -m retrieval`: see retrieval.cli."""

import atexit
import os
import sys
import threading


def _exit_without_teardown(code: int) -> None:
    """End the process with `code` as the interpreter's exit would, without its teardown.

    The interpreter's exit joins the threads, runs the atexit functions and flushes the standard
    streams, then frees every object one by one and collects the whole heap once more: a tenth of
    a second after a run over 100,000 documents, for memory the system takes back at once. This
    does the first three and ends the process. While another thread runs (the interpreter would
    wait for it), without CPython's atexit runner, or when a stream cannot be flushed (the
    interpreter reports that as before), it returns and the interpreter's own exit does it all.
    """
    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_functions is None or threading.active_count() > 1:
        return
    run_exit_functions()  # each function once: the runner forgets them
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # a closed or missing stream
        return
    os._exit(code)


if __name__ == "__main__":
    # Imported here, not above: importing this module for `_exit_without_teardown` alone (its
    # test, in a fresh interpreter) then costs the standard library, not the whole command.
    from retrieval import cli
    from retrieval.cli import main

    cli._left_to_exit = []  # the command's objects are left to the process's end (cli._left_to_exit)
    code = main()
    _exit_without_teardown(code)
    sys.exit(code)
