"""The built-in methods: one module each, named after the method, with a
`factory(settings, *, replay)` (retrieval.evaluation.pipeline finds them by listing this package).
`base` holds the contract every method follows, built-in or the user's own."""

from __future__ import annotations

import pkgutil

__all__ = ["builtin_methods"]

_NOT_METHODS = {"base"}  # the contract (shared helpers are in the support package)


def builtin_methods() -> tuple[str, ...]:
    """The built-in method names: the modules of this package that define a factory."""
    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.ispkg and m.name not in _NOT_METHODS))
