"""What a gate result says of the base branch it was compared with (`GateResult`'s base-side
properties): the ref, what it gates that the run does not produce, why nothing was compared with
it, and a profile it gates that the run switched away from. Beside retrieval.gate.against, which
makes the comparison these read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrieval.gate.against import Against
    from retrieval.gate.reference import BaseBranch

__all__ = ["BaseSide"]


class BaseSide:
    """The base-branch side of a gate result, read from its `branch` (what the ref gates) and
    `base` (the run compared with it); `acceptance` and `profile` are the result's own."""

    branch: BaseBranch | None
    base: Against | None

    @property
    def acceptance(self) -> dict[str, Any] | None:  # the result's own (GateResult.acceptance)
        raise NotImplementedError

    @property
    def profile(self) -> str:  # the result's own (GateResult.profile)
        raise NotImplementedError

    @property
    def reference(self) -> str | None:
        return self.branch.ref if self.branch else None

    @property
    def reference_entry(self) -> Mapping[str, Any] | None:
        return self.branch.entry if self.branch else None

    @property
    def reference_unproduced(self) -> list[str]:
        return list(self.base.unproduced) if self.base else []

    @property
    def reference_note(self) -> str | None:
        """Why nothing was compared with the ref's baseline (it gates nothing here), or None."""
        branch = self.branch
        if branch is None or branch.entry is not None:
            return None
        if branch.project is None:
            return f"{branch.ref} has no retrieval project here: nothing to lower"
        return f"{branch.ref} has no baseline for profile {branch.profile!r}: nothing to lower"

    @property
    def profile_dropped(self) -> str | None:
        """Why the profile the ref gates is not the one this run gates and no acceptance names it."""
        branch = self.branch
        if branch is None or branch.entry is None or branch.profile == self.profile:
            return None
        if f"profile {branch.profile} (removed)" in ((self.acceptance or {}).get("figures") or {}):
            return None
        return (
            f"{branch.ref} gates profile {branch.profile!r} and this run gates {self.profile!r}: its figures are "
            f"compared with this profile's, and the switch itself is a drop. If it is intended, accept it with "
            f'`pytest --update-baseline --allow-regression "REASON" --retrieval-baseline-ref {branch.ref}`.'
        )
