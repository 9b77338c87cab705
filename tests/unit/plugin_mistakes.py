"""User method factories with the mistakes people make: fixtures for test_pipeline.py."""

from __future__ import annotations

import numpy as np

from retrieval import Context, Ranking, ranking_from_ids


class NoArgument:
    """A class given as the factory, whose constructor takes no settings."""

    name = "no-argument"
    requires: tuple[str, ...] = ()
    needs_vectors = False

    def __init__(self) -> None:
        pass

    def rank(self, context: Context) -> list[Ranking]:
        return []


class TooFew(NoArgument):
    name = "too-few"

    def __init__(self, settings: object) -> None:
        pass

    def rank(self, context: Context) -> list[Ranking]:
        one = Ranking(np.array([0]), np.array([1.0]))
        return [one] * (len(context.dataset.questions) - 1)


class OutOfCorpus(TooFew):
    name = "out-of-corpus"

    def rank(self, context: Context) -> list[Ranking]:
        return [Ranking(np.array([10_000]), np.array([1.0])) for _ in context.dataset.questions]


class OnePastTheEnd(TooFew):
    """Ranks the last document, then the index the corpus's size (one past the end): the
    off-by-one of an engine that numbers its documents from 1."""

    name = "one-past-the-end"

    def rank(self, context: Context) -> list[Ranking]:
        n = len(context.dataset.documents)
        return [Ranking(np.array([n - 1, n]), np.array([2.0, 1.0])) for _ in context.dataset.questions]


class LastDocument(TooFew):
    """Ranks the corpus's last document first: a valid index, the highest."""

    name = "last-document"

    def rank(self, context: Context) -> list[Ranking]:
        n = len(context.dataset.documents)
        return [Ranking(np.array([n - 1, 0]), np.array([2.0, 1.0])) for _ in context.dataset.questions]


class Chicken(TooFew):
    """Requires egg, which requires chicken: a cycle."""

    name = "chicken"
    requires = ("egg",)


class Egg(TooFew):
    name = "egg"
    requires = ("plugin_mistakes:Chicken",)  # by its spec: a requirement may give either


class Ouroboros(TooFew):
    name = "ouroboros"
    requires = ("ouroboros",)


class TwiceInOne(TooFew):
    """Each question ranks document 3 once (fine: every question may rank it), except the
    second question, which ranks it twice."""

    name = "twice-in-one"

    def rank(self, context: Context) -> list[Ranking]:
        once = Ranking(np.array([3, 4]), np.array([2.0, 1.0]))
        twice = Ranking(np.array([3, 3]), np.array([2.0, 1.0]))
        return [twice if i == 1 else once for i in range(len(context.dataset.questions))]


class FloatIndices(TooFew):
    name = "float-indices"

    def rank(self, context: Context) -> list[Ranking]:
        return [Ranking(np.array([1.5]), np.array([1.0])) for _ in context.dataset.questions]


class UnknownId(TooFew):
    """An engine whose index holds a document the evaluated corpus does not."""

    name = "unknown-id"

    def rank(self, context: Context) -> list[Ranking]:
        return [ranking_from_ids(["HEL-4040", "prod-only"], context.dataset) for _ in context.dataset.questions]


class BareKeyVariable(TooFew):
    name = "bare-key-variable"
    key_variables = "SEARCH_KEY"  # a string, not a tuple of names


class BareSource(TooFew):
    name = "bare-source"
    sources = "myapp.search"  # a string, not a tuple of names


class KeyedInProcess(TooFew):
    """Declares the variable of a key it would use: a fixture for the gate's secret scan."""

    name = "keyed"
    key_variables = ("FIXTURE_GATE_KEY",)

    def rank(self, context: Context) -> list[Ranking]:
        return [Ranking(np.array([0]), np.array([1.0])) for _ in context.dataset.questions]


class Impostor(TooFew):
    name = "bm25"


class BadCalls(TooFew):
    name = "bad-calls"
    calls = "grpc"


class NoRank:
    name = "no-rank"
    requires: tuple[str, ...] = ()
    needs_vectors = False

    def __init__(self, settings: object) -> None:
        pass


def too_few(settings: object) -> TooFew:
    return TooFew(settings)
