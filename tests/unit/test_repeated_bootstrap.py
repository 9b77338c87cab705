"""The paired bootstrap computed here as scipy computes it (retrieval.measures.paired: REPEATED
releases): the same interval as `scipy.stats.bootstrap` to the last bit, on seeded inputs of
every size the gate meets, other resample counts, seeds and confidence levels; scipy's own for
another release and for values that are not finite (its NaN, its warning).

scipy.stats is imported by the tests, not at collection: about half a second of CPU that every
pytest-xdist worker paid, for the one worker that runs this module."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from retrieval.measures import paired
from retrieval.measures.paired import RESAMPLE_CHUNK, RESAMPLES, SEED, bootstrap_interval


def _scipys(values: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED, confidence: float = 0.95) -> tuple:
    import scipy.stats

    result = scipy.stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=resamples,
        batch=RESAMPLE_CHUNK,
        vectorized=True,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def test_the_interval_is_scipys_to_the_last_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    import scipy.stats

    if paired._scipy_release() not in paired.REPEATED:
        # A scipy release the replica was not checked against takes scipy's own path: a new release
        # of scipy must not fail the suite, only ask for the check (then add it to REPEATED).
        pytest.skip(f"scipy {paired._scipy_release()} is not in REPEATED: its bootstrap is scipy's own")
    rng = np.random.default_rng(43)
    cases = []
    for _ in range(50):
        n = int(rng.integers(2, 90))
        # Differences as the figures give them (multiples of 1/k, rounded to 4 decimals), ties, and noise.
        kind = int(rng.integers(3))
        if kind == 0:
            values = rng.choice([0, 0, 0, 1, -1, 0.5, -0.5, 1 / 3, -0.25], size=n)
        elif kind == 1:
            values = np.round(rng.normal(size=n), 4)
        else:
            values = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8)
        cases.append((values, RESAMPLES, SEED, 0.95))
    cases += [(np.array([0.5, -0.25, 1 / 3]), 2, 0, 0.95), (np.array([1.0, 0.0]), 999, 5, 0.9)]
    cases += [(np.round(rng.normal(size=25), 4), 2_500, 7, 0.99), (np.array([0.25] * 40), RESAMPLES, SEED, 0.95)]
    expected = [_scipys(*case) for case in cases]

    def no_scipy(*args: object, **kwargs: object) -> None:
        raise AssertionError("scipy's bootstrap was called")

    monkeypatch.setattr(scipy.stats, "bootstrap", no_scipy)
    got = [bootstrap_interval(*case) for case in cases]
    assert got == expected


def test_another_release_and_values_not_finite_are_scipys(monkeypatch: pytest.MonkeyPatch) -> None:
    import scipy.stats

    values = np.array([0.5, -0.25, 0.0, 1.0])
    expected = _scipys(values)
    called: list[int] = []
    real = scipy.stats.bootstrap

    def counted(*args: object, **kwargs: object) -> object:
        called.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(scipy.stats, "bootstrap", counted)
    monkeypatch.setattr(paired, "_scipy_release", lambda: "9.9")
    assert bootstrap_interval(values) == expected and called == [1]
    monkeypatch.undo()
    monkeypatch.setattr(scipy.stats, "bootstrap", counted)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        low, high = bootstrap_interval([0.5, float("nan"), 1.0])
    assert np.isnan(low) and np.isnan(high) and called == [1, 1]
    assert any(issubclass(w.category, scipy.stats.DegenerateDataWarning) for w in said)
    # One resample: scipy's interval, with the warnings of its standard error of one value.
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert bootstrap_interval(values, 1, 3) == _scipys(values, 1, 3)
    assert called == [1, 1, 1, 1] and any(issubclass(w.category, RuntimeWarning) for w in said)
