"""The user's objects a method spec names (`module.path:attr`), imported with a one-line error.

A `module:factory` method (retrieval.evaluation.pipeline) and a framework's retriever
(retrieval.adapters.frameworks) both name an object of the user's code; a module that is not
installed or an attribute it lacks is a configuration mistake, said in the same words.
"""

from __future__ import annotations

import importlib
from typing import Any

from retrieval.config.settings import ConfigError

__all__ = ["spec_object"]


def spec_object(spec: str, module_name: str, attr: str, fix: str) -> Any:
    """`module_name.attr` imported; ConfigError naming method `spec`, the cause and `fix` when it cannot be."""
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"method {spec!r}: cannot import it ({exc}). {fix}") from exc
