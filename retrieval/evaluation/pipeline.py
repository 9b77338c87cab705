"""Which methods run, built from their names or `module:factory` specs, in dependency order.

A built-in method is one module of `retrieval.methods` named after it, with a
`factory(settings, *, replay)`; a user method is any `module.path:factory` whose
`factory(settings)` returns an object following `retrieval.methods.base.Method`; a method that
wraps something is `SCHEME:REST`, built by its scheme's adapter (`trec:runs/engine.run`, a run
file; `langchain:module:object`, `llamaindex:module:object` and `haystack:module:object`, a
framework's retriever).
Either way the evaluator only reads the method's declarations.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace

from retrieval.config import ConfigError, Settings
from retrieval.config.names import name_problem
from retrieval.config.spec_objects import spec_object
from retrieval.methods import builtin_methods
from retrieval.methods.base import Declaration, DeclarationError, Method, MethodUnavailable, declaration
from retrieval.text.redaction import redacted

__all__ = ["BUILTIN_METHODS", "SCHEMES", "MethodUnavailable", "Plan", "builtin_methods", "plan"]

BUILTIN_METHODS = builtin_methods()

# SCHEME -> the adapter function building its method from (the rest of the spec, the settings);
# the configuration accepts the same schemes (retrieval.config.setting_values.SPEC_SCHEMES).
SCHEMES: dict[str, str] = {
    "trec": "retrieval.adapters.trec_run:from_spec",
    "langchain": "retrieval.adapters.frameworks:langchain_from_spec",
    "llamaindex": "retrieval.adapters.frameworks:llamaindex_from_spec",
    "haystack": "retrieval.adapters.frameworks:haystack_from_spec",
}


@dataclass
class Plan:
    """The methods to run, in dependency order, and what became of the others."""

    methods: list[Method] = field(default_factory=list)
    declarations: dict[str, Declaration] = field(default_factory=dict)
    wanted: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    # `module:factory` spec -> the name of the method it built: a requirement may give either.
    aliases: dict[str, str] = field(default_factory=dict)

    def pipeline(self, name: str) -> list[str]:
        """The methods `name` runs through, dependencies first (hybrid: bm25, vector, hybrid)."""
        stages: list[str] = []

        def visit(current: str) -> None:
            for dependency in self.declarations[current].requires:
                visit(dependency)
            if current not in stages:
                stages.append(current)

        visit(name)
        return stages

    def order(self, late: Collection[str] = ()) -> list[Method]:
        """The methods, each after those it requires; a method named in `late` runs only when
        nothing else can (a method that prepared background work: the others overlap it)."""
        done: set[str] = set()
        left = list(self.methods)
        order: list[Method] = []
        while left:
            ready = [m for m in left if done.issuperset(self.declarations[m.name].requires)]
            chosen = next((m for m in ready if m.name not in late), ready[0])
            order.append(chosen)
            done.add(chosen.name)
            left.remove(chosen)
        return order

    def needs_vectors(self, name: str) -> bool:
        """True when `name` or anything it runs through reads the shared embeddings."""
        return any(self.declarations[m].needs_vectors for m in self.pipeline(name))


def _user_method(spec: str, settings: Settings) -> Method:
    module_name, _, attr = spec.partition(":")
    fix = "Give module.path:factory, with the module installed or on PYTHONPATH."
    factory = spec_object(spec, module_name, attr, fix)
    if not callable(factory):
        raise ConfigError(f"method {spec!r}: {attr} is not callable. Point the spec at a function taking settings.")
    try:
        method = factory(settings)
    except TypeError as exc:
        raise ConfigError(
            f"method {spec!r}: calling {attr}(settings) failed ({exc}). The factory must take one argument, "
            "the Settings, and return the method object."
        ) from exc
    for needed in ("name", "requires", "needs_vectors", "rank"):
        if not hasattr(method, needed):
            raise ConfigError(
                f"method {spec!r}: the object {attr}(settings) returned has no {needed!r}. A method needs name, "
                "requires, needs_vectors and rank(context) (see retrieval.methods.base.Method)."
            )
    return _not_builtin(method, spec)


def _not_builtin(method: Method, spec: str) -> Method:
    if method.name in BUILTIN_METHODS:
        raise ConfigError(
            f"method {spec!r} is named {method.name!r}, the name of a built-in method. Give it another name: "
            "its figures would replace the built-in's row."
        )
    return method


def _wrapped(spec: str, settings: Settings) -> Method:
    scheme, _, rest = spec.partition(":")
    module_name, _, function = SCHEMES[scheme].partition(":")
    method: Method = getattr(importlib.import_module(module_name), function)(rest, settings)
    return _not_builtin(method, spec)


def _builtin(name: str, settings: Settings, replay: bool) -> Method:
    module = importlib.import_module(f"retrieval.methods.{name}")
    method: Method = module.factory(settings, replay=replay)
    return method


def _build(name: str, settings: Settings, replay: bool) -> Method:
    if name in BUILTIN_METHODS:
        return _builtin(name, settings, replay)
    if name.partition(":")[0] in SCHEMES:
        return _wrapped(name, settings)
    if ":" in name:
        return _user_method(name, settings)
    raise ConfigError(
        f"unknown method {name!r}: choose among {', '.join(BUILTIN_METHODS)} or give module:factory "
        "(or trec:RUN_FILE, langchain:module:object, llamaindex:module:object, haystack:module:object)."
    )


def plan(requested: Sequence[str], settings: Settings, *, replay: bool, extra: Sequence[Method] = ()) -> Plan:
    """Build the requested methods (and what they require), in dependency order.

    `extra` adds method objects built by the caller. A requested built-in this profile cannot
    provide is left out with its reason (`Plan.unavailable`); a method required by another
    must be available, or the configuration is refused. A requirement names a method by its
    name (`title-overlap`, wherever it stands in `requested`) or by its `module:factory` spec;
    a spec is an alias of the name (`Plan.aliases`), and the declarations hold names.
    """
    result = Plan()
    built: dict[str, Method] = {method.name: method for method in extra}
    declared = {method.name: _declared(method, method.name) for method in extra}
    made: dict[str, str] = {name: name for name in built}  # a name or spec -> the method's name

    def build(token: str) -> str:
        if token in made or token in built:
            return made.get(token, token)
        method = _build(token, settings, replay)
        own = _declared(method, token)
        if own.name in built:
            raise ConfigError(f"two methods are named {own.name!r}: give each its own name.")
        built[own.name], declared[own.name], made[token] = method, own, own.name
        if token != own.name:
            result.aliases[token] = own.name
        return own.name

    # First every requested method, so that a requirement may name one listed after it.
    names = [*requested, *(m.name for m in extra if m.name not in requested)]
    for token in names:
        try:
            build(token)
        except MethodUnavailable as why:
            # Said in the report, the run log and the gate summary: a team's factory may quote its login.
            result.unavailable[token] = redacted(str(why))

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if name in chain:
            raise ConfigError(f"methods require each other in a cycle: {' -> '.join((*chain, name))}.")
        if name in result.declarations:
            return
        requires = []
        for dependency in declared[name].requires:
            try:
                requires.append(build(dependency))
            except MethodUnavailable as why:
                raise ConfigError(f"method {name!r} requires {dependency!r}, which is unavailable: {why}") from why
            visit(requires[-1], (*chain, name))
        source = declared[name].candidate_source
        result.methods.append(built[name])
        result.declarations[name] = replace(
            declared[name], requires=tuple(requires), candidate_source=source and made.get(source, source)
        )

    for token in names:
        if token in made:
            visit(made[token], ())
            if made[token] not in result.wanted:
                result.wanted.append(made[token])
    return result


def _declared(method: Method, name: str) -> Declaration:
    try:
        declared = declaration(method)
    except DeclarationError as exc:
        raise ConfigError(f"method {name!r}: {exc}.") from exc
    # The name (and the channel) become cassette file names: no path, no shared cassette's name.
    problem = name_problem("method", declared.name) or name_problem("channel", declared.channel)
    if problem:
        raise ConfigError(f"method {name!r}: {problem}")
    return declared
