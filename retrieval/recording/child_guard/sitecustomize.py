"""Run at start-up by every Python child process of a closed replay, whose PYTHONPATH names this
folder (retrieval.recording.process_tree): the socket guard for the child's whole life, then the
sitecustomize module this one hides on the path, if there is one.

The guard is loaded from its file, not imported: the child may be another interpreter, without
this package installed. This folder holds nothing else a child could import by name (its
`__init__.py` makes it part of the package, no module of the child's).
"""

import importlib.machinery
import importlib.util
import os
import sys
import types


def _load(name: str, path: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _close() -> None:
    started_by = os.environ.get("RETRIEVAL_REPLAY_CLOSED")
    if started_by:
        guard = _load("_retrieval_socket_guard", os.path.join(os.path.dirname(_HERE), "socket_guard.py"))
        guard.close_child(started_by)


def _chain() -> None:
    """The sitecustomize module that would have run without this one (a distribution's, a venv's)."""
    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and spec.origin != __file__:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_HERE = os.path.dirname(os.path.abspath(__file__))
# Only as the interpreter's own sitecustomize: imported as retrieval.recording.child_guard.sitecustomize
# (a tool walking the package), it closes nothing and runs no other sitecustomize.
if __name__ == "sitecustomize":
    _close()
    _chain()
