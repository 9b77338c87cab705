"""A request replay could not answer, said in one line: the request, and where its body first
differs from the nearest recorded one (a setting, or a list built from a set)."""

from __future__ import annotations

import copy
import sys
from typing import Any

from retrieval.providers.base import cause_of
from retrieval.recording.matching import body_difference, prepare_request

__all__ = ["missed_request"]


def missed_request(exc: BaseException) -> str | None:
    """The request vcrpy refused in the chain behind `exc`, described in one line for a
    replay-miss message ("POST http://…/search (…differs in its body)"), or None."""
    errors = sys.modules.get("vcr.errors")
    if errors is None:  # vcrpy never loaded: it refused nothing (importing it cost a method's failure 0.3 s)
        return None
    miss = cause_of(exc, errors.CannotOverwriteExistingCassetteException)
    return None if miss is None else describe_miss(miss.failed_request, miss.cassette)


# vcrpy's matcher names (their functions' names), in words.
_MATCHER_WORDS = {"same_body": "body", "loopback_port": "port", "query": "query string"}


def describe_miss(request: Any, cassette: Any) -> str:
    """A refused request and how the closest recorded one differs from it."""
    similar = cassette.find_requests_with_most_matches(request)
    if not similar:
        why = "the cassette holds no request like it"
    elif not similar[0][2]:
        why = "recorded, but sent more times than when it was recorded"
    else:
        differing = [_MATCHER_WORDS.get(name, name) for name, _ in similar[0][2]]
        why = f"the closest recorded request differs in its {', '.join(dict.fromkeys(differing))}"
        # vcrpy returns every recorded request equally close by matcher: the body fewest values apart is named.
        where = body_difference([stored for stored, _, _ in similar], request) if "body" in differing else None
        if where:  # what the code under test now sends differently: a changed setting, an unstable order
            why += f", first {where}"
    # Shown as recorded: without the credentials the URL may carry (the message reaches CI logs).
    shown = prepare_request(copy.deepcopy(request))
    return f"{shown.method} {shown.uri} ({why})"


def counting_misses(cassette: Any) -> list[Any]:
    """Keep each request a replaying cassette has no answer for, so a miss the calling code
    catches (a retriever with a fallback) still fails the run."""
    missed: list[Any] = []
    can_play = cassette.can_play_response_for

    def counted(request: Any) -> bool:
        found = bool(can_play(request))
        if not found:
            missed.append(request)
        return found

    cassette.can_play_response_for = counted
    return missed
