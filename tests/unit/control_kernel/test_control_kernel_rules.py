"""Pure rules: scope coverage (control-plane.md §2.6), write-scope overlap (§2.4), resume conditions (§3.4),
evidence applicability and acceptance status (§5)."""

from __future__ import annotations

from typing import Any

import pytest

from wakeful.control import ControlRefused
from wakeful.control.applicability import acceptance_status, criterion_status, inapplicable_reason
from wakeful.control.canonical import digest
from wakeful.control.errors import http_status
from wakeful.control.rules import check_condition, check_scope, covers, globs_overlap


@pytest.mark.parametrize(("gate", "required", "want"), [
    ("production:goal:deploy", "production:goal:deploy", True),          # equal
    ("production:project:deploy", "production:goal:deploy/eu", True),    # broader granularity, key prefix
    ("production:goal:*", "production:goal:anything/at/all", True),      # star
    ("production:lane:deploy", "production:goal:deploy", False),         # narrower granularity
    ("resource:global:*", "production:action:x", False),                 # other kind
    ("production:goal:deploy", "production:goal:deployment", False),     # not a /-prefix
    ("production:goal:deploy/", "production:goal:deploy/eu", True),      # trailing slash
    ("production:goal:deploy/eu", "production:goal:deploy", False),      # child does not cover parent
    ("write_scope:global:src", "write_scope:action:src/a/b.py", True),
])
def test_scope_coverage(gate: str, required: str, want: bool) -> None:
    assert covers(gate, required) is want


@pytest.mark.parametrize(("a", "b", "want"), [
    ("src/a.py", "src/a.py", True), ("src/a.py", "src/b.py", False), ("src", "src/a.py", True),
    ("src/**", "src/x/y.py", True), ("src/*.py", "docs/*.md", False), ("docs/", "docs/a.md", True),
    ("src/a*", "src/b*", False), ("*", "anything", True), ("src/api/**", "src/apis.py", False),
])
def test_write_scope_overlap_is_conservative(a: str, b: str, want: bool) -> None:
    assert globs_overlap(a, b) is want and globs_overlap(b, a) is want


@pytest.mark.parametrize("bad", ["", "nope:x", "time:soon", "time:", "work_done:", "loop_wake:has space",
                                 3, None, "x" * 300])
def test_bad_conditions_are_invalid_command(bad: Any) -> None:
    with pytest.raises(ControlRefused) as refused:
        check_condition(bad, "f")
    assert refused.value.code == "invalid_command"


@pytest.mark.parametrize("bad", ["production:goal", "prod:goal:x", "production:team:x", "production:goal:",
                                 "production:goal:" + "k" * 201, 7])
def test_bad_scopes_are_invalid_command(bad: Any) -> None:
    with pytest.raises(ControlRefused):
        check_scope(bad, "f")


CRIT = {"id": "c", "text": "t", "workload": {"kind": "suite", "ref": "s"}, "independent": True}
CRIT_D = digest(CRIT)
WL = digest({"kind": "suite", "ref": "s"})


def _ev(**over: Any) -> dict[str, Any]:
    ev = {"id": "ev_1", "criterion_ids": ["c"], "subject": "code", "artifact_revision": "r1",
          "workload": {"kind": "suite", "ref": "s", "digest": WL}, "acceptance_revision": 1,
          "criterion_digests": {"c": CRIT_D}, "verdict": "pass", "recorded_by": "agt_a"}
    ev.update(over)
    return ev


def _reason(ev: dict[str, Any], *, rev: int = 1, digests: dict[str, str] | None = None,
            subjects: dict[str, str] | None = None, completers: frozenset[str] = frozenset(),
            crit: dict[str, Any] | None = None) -> str | None:
    c = dict(crit if crit is not None else CRIT)
    c["workload_digest"] = digest(c["workload"]) if c.get("workload") else None
    return inapplicable_reason(ev, c, criterion_id="c", acceptance_revision=rev,
                               criterion_digests=digests if digests is not None else {"c": CRIT_D},
                               subjects=subjects if subjects is not None else {"code": "r1"}, completers=completers)


def test_applicability_checks_each_rule() -> None:
    assert _reason(_ev()) is None
    assert _reason(_ev(), subjects={"code": "r2"}) == "stale_revision"
    assert _reason(_ev(subject="docs")) == "stale_revision"
    assert _reason(_ev(), crit={**CRIT, "subject": "docs"}) == "stale_revision"
    assert _reason(_ev(), rev=2) is None  # same criterion digest under a newer revision still counts
    assert _reason(_ev(), rev=2, digests={"c": "other"}) == "stale_acceptance"
    assert _reason(_ev(workload={"kind": "suite", "ref": "t", "digest": "x"})) == "workload_mismatch"
    assert _reason(_ev(workload=None)) == "workload_mismatch"
    assert _reason(_ev(workload=None), crit={**CRIT, "workload": None}) is None
    assert _reason(_ev(), completers=frozenset({"agt_a"})) == "not_independent"
    assert _reason(_ev(), completers=frozenset({"agt_b"})) is None
    assert inapplicable_reason(_ev(), None, criterion_id="c", acceptance_revision=1, criterion_digests={},
                               subjects={}) == "criterion_removed"


def test_criterion_status_newest_deciding_evidence_wins() -> None:
    crit = {**CRIT, "workload_digest": WL, "independent": False}
    kw: dict[str, Any] = {"acceptance_revision": 1, "criterion_digests": {"c": CRIT_D}, "subjects": {"code": "r1"}}
    assert criterion_status("c", crit, [], **kw).status == "missing"
    evs = [_ev(id="e1", verdict="pass"), _ev(id="e2", verdict="fail"), _ev(id="e3", verdict="inconclusive")]
    got = criterion_status("c", crit, evs, **kw)
    assert (got.status, got.evidence_id) == ("fail", "e2")
    stale = criterion_status("c", crit, [_ev(artifact_revision="r0")], **kw)
    assert stale.status == "stale"
    assert criterion_status("c", crit, evs, binding_stale=True, **kw).status == "stale"


@pytest.mark.parametrize(("statuses", "has", "want"), [
    ([], False, "none"), (["pass", "fail"], True, "failed"), (["pass", "stale"], True, "stale"),
    (["pass", "pass"], True, "accepted"), (["pass", "missing"], True, "partial"),
    (["missing", "missing"], True, "unverified"), (["stale", "fail"], True, "failed"),
])
def test_acceptance_status(statuses: list[str], has: bool, want: str) -> None:
    assert acceptance_status(statuses, has_contract=has) == want


def test_http_mapping() -> None:
    assert [http_status(c) for c in ("invalid_command", "forbidden", "not_registered", "excluded", "not_found",
                                     "unavailable", "claim_stale", "revision_conflict")] == [
        400, 403, 403, 403, 404, 503, 409, 409]
