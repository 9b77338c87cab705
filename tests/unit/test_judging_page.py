"""The judging page's session and server, without a browser: the depth-k pool of every method, the
pair as the page shows it (the question's analysed terms marked in the candidate, by the project's
analyzer), every grade on disk before it is answered, undo that never loses another tab's grade,
and a server that answers only this page on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from judging_fixture import copy_demo, demo_pool, get, post
from loopback_http import POLL_INTERVAL

from retrieval.data.analyzer import analyze, term_spans
from retrieval.data.dataset import Dataset
from retrieval.data.judgment_file import JUDGMENTS_FILE, Judgment, read_judgments, update_judgments
from retrieval.judging.page_data import segments
from retrieval.judging.pool import Candidate, unjudged
from retrieval.judging.server import HOST, JudgingServer, start_server
from retrieval.judging.session import JudgingError, JudgingSession

DATE = "2025-06-02T09:14:05Z"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Dataset, list[Candidate]]:
    root = copy_demo(tmp_path_factory.mktemp("judging") / "project")
    _, dataset, pool = demo_pool(root)
    return root, dataset, pool


@pytest.fixture
def session(demo: tuple[Path, Dataset, list[Candidate]], tmp_path: Path) -> JudgingSession:
    _, dataset, pool = demo
    return JudgingSession(dataset, unjudged(pool), "human:ana", tmp_path / JUDGMENTS_FILE, tmp_path / "lock")


@pytest.fixture
def server(session: JudgingSession) -> Iterator[JudgingServer]:
    served = start_server(session, 0)
    # shutdown() waits for the loop's next poll: at the default 0.5 s that was each test's teardown.
    thread = threading.Thread(target=served.serve_forever, args=(POLL_INTERVAL,), daemon=True)
    thread.start()
    try:
        yield served
    finally:
        served.shutdown()
        served.server_close()
        thread.join(timeout=10)


def test_the_pool_holds_the_top_k_of_every_method_with_their_ranks(demo: tuple[Path, Dataset, list[Candidate]]) -> None:
    _, dataset, pool = demo
    by_question: dict[str, list[Candidate]] = {}
    for c in pool:
        by_question.setdefault(c.question, []).append(c)
    assert list(by_question) == [q.id for q in dataset.questions]
    for question in dataset.questions:
        pooled = by_question[question.id]
        # Each method gives at most 5 documents; the pool is their union, best rank first.
        assert len({c.document for c in pooled}) == len(pooled) <= 15
        assert [c.best_rank for c in pooled] == sorted(c.best_rank for c in pooled)
        assert {c.document for c in pooled if c.judged} <= set(question.judgments)
        counts = {m: sum(1 for c in pooled for hit in c.hits if hit[0] == m) for m in ("bm25", "vector", "hybrid")}
        assert all(0 < n <= 5 for n in counts.values()), counts
    first = pool[0]
    assert first.question == "q01" and first.hits == tuple(sorted(first.hits, key=lambda h: (h[1], h[0])))
    # The demo judges one document per question: most of the pool is unjudged.
    assert 150 < len(unjudged(pool)) < len(pool)


def test_highlighted_spans_are_the_analyzer_s_terms(demo: tuple[Path, Dataset, list[Candidate]]) -> None:
    _, dataset, _ = demo
    for document in dataset.documents:
        spans = term_spans(document.content)
        assert [t for _, _, terms in spans for t in terms] == analyze(document.content)
        assert all(document.content[a:b].strip() == document.content[a:b] for a, b, _ in spans)
    text = "Restoring the backups restored nothing: HEL 4040 again."
    english = term_spans(text, "en")
    assert [text[a:b] for a, b, _ in english] == [
        "Restoring",
        "backups",
        "restored",
        "nothing:",
        "HEL 4040",
    ]  # "the", "again": stop words
    marked = segments(text, {"restor", "hel-4040"}, "en")
    assert "".join(piece for piece, _ in marked) == text
    assert [piece for piece, on in marked if on] == ["Restoring", "restored", "HEL 4040"]


def test_a_pair_as_the_page_shows_it(session: JudgingSession) -> None:
    index = next(i for i, c in enumerate(session.pool) if c.question == "q11")
    shown = session.details(index)
    question = shown["question"]
    assert question["id"] == "q11" and question["type"] == "paraphrase"
    assert question["terms"] == sorted(set(analyze("Comment revenir à l'état d'hier après une fausse manipulation ?")))
    assert shown["relevant"] == [
        {"id": "proc-restauration", "title": "Restaurer une sauvegarde de l'espace de travail", "grade": 1}
    ]
    candidate = shown["candidate"]
    assert candidate["id"] == session.pool[index].document
    text = "".join(piece for piece, _ in candidate["text"])
    assert text == session.dataset.documents[session.dataset.positions[candidate["id"]]].text
    for piece, marked in candidate["text"]:
        assert marked == (bool(analyze(piece)) and not set(analyze(piece)).isdisjoint(question["terms"]))
    assert shown["hits"] == [list(h) for h in session.pool[index].hits]
    with pytest.raises(JudgingError, match="no pair 9999: the pool holds"):
        session.details(9999)


def test_a_grade_is_on_disk_before_it_is_answered_and_undo_puts_back_what_it_replaced(session: JudgingSession) -> None:
    pair = session.pool[3]
    body = {"question": pair.question, "document": pair.document}
    first = session.judge({**body, "grade": 2})
    assert first["previous"] is None
    [line] = read_judgments(session.path)
    assert (line.question, line.document, line.grade, line.source) == (pair.question, pair.document, 2, "human:ana")
    assert first["judgment"] == {"grade": 2, "source": "human:ana", "date": line.date}
    assert first["judgments"]["\t".join(pair.pair)]["judgment"]["grade"] == 2
    second = session.judge({**body, "grade": 0})
    assert second["previous"] == first["judgment"]
    # Undo the second: back to 2; undo the first: no judgment at all.
    assert (
        session.undo({**body, "written": second["judgment"], "previous": second["previous"]})["restored"]["grade"] == 2
    )
    assert [j.grade for j in read_judgments(session.path)] == [2]
    assert session.undo({**body, "written": first["judgment"], "previous": None})["restored"] is None
    assert read_judgments(session.path) == []


def test_a_killed_writers_half_file_is_removed_by_the_next_grade_and_the_file_kept_whole(
    session: JudgingSession,
) -> None:
    # What a server killed mid-write leaves (test_judging_crash.py, slow, kills a real one): its
    # temporary file, named for its dead process, beside a whole judgments file.
    first, second = session.pool[0], session.pool[1]
    session.judge({"question": first.question, "document": first.document, "grade": 3})
    before = session.path.read_bytes()
    half = session.path.parent / f".{JUDGMENTS_FILE}.999999999-deadbeef.tmp"
    half.write_bytes(before[: len(before) // 2])
    session.judge({"question": second.question, "document": second.document, "grade": 1})
    assert not half.exists()
    assert {(j.question, j.document, j.grade) for j in read_judgments(session.path)} == {
        (first.question, first.document, 3),
        (second.question, second.document, 1),
    }


def test_an_undo_never_takes_back_another_tab_s_grade(session: JudgingSession) -> None:
    pair = session.pool[0]
    body = {"question": pair.question, "document": pair.document}
    mine = session.judge({**body, "grade": 1})
    other_tab = session.judge({**body, "grade": 3})  # the same judge, another tab, later
    with pytest.raises(JudgingError, match="judged again since") as refused:
        session.undo({**body, "written": mine["judgment"], "previous": None})
    assert refused.value.status == 409
    assert [(j.grade, j.date) for j in read_judgments(session.path)] == [(3, other_tab["judgment"]["date"])]


def test_the_page_sees_the_other_sources_judgments_of_its_pairs(session: JudgingSession) -> None:
    a, b = session.pool[0], session.pool[1]
    extra = [
        Judgment(a.question, a.document, 2, "human:bo", DATE),
        Judgment(a.question, a.document, 1, "llm:m", DATE),
        Judgment(b.question, b.document, 3, "llm:m", DATE),
        Judgment("q99", "elsewhere", 1, "human:bo", DATE),  # not a pair of this pool
    ]
    update_judgments(session.path, session.lock, lambda current: current.update({j.key: j for j in extra}))
    seen = session.judgments()
    assert seen == {
        "\t".join(a.pair): {
            "judgment": {"grade": 2, "source": "human:bo", "date": DATE},
            "proposals": [{"model": "m", "grade": 1}],
        },
        "\t".join(b.pair): {"judgment": None, "proposals": [{"model": "m", "grade": 3}]},
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"question": "q01", "document": "nope", "grade": 1},
            "question 'q01', document 'nope' is not a pair of this pool",
        ),
        ({"grade": 4}, "grade 4: give 0, 1, 2 or 3"),
        ({"grade": True}, "grade True: give 0, 1, 2 or 3"),
        ({"grade": "2"}, "grade '2': give 0, 1, 2 or 3"),
    ],
)
def test_a_bad_grade_is_refused_and_nothing_is_written(session: JudgingSession, body: dict, message: str) -> None:
    pair = session.pool[0]
    with pytest.raises(JudgingError, match=message):
        session.judge({"question": pair.question, "document": pair.document, **body})
    assert not session.path.exists()
    with pytest.raises(JudgingError, match="written must be a judgment"):
        session.undo(
            {"question": pair.question, "document": pair.document, "written": {"grade": 1, "date": "yesterday"}}
        )


def test_the_server_answers_only_its_page_on_loopback(server: JudgingServer, session: JudgingSession) -> None:
    assert server.server_address[0] == HOST == "127.0.0.1"
    url = server.url
    status, page = get(url)
    assert status == 200 and b'<script src="/page.js" defer></script>' in page
    for name in ("", "page.js", "page.css"):
        status, body = get(url + name)
        assert status == 200
        # Nothing the page loads comes from anywhere else.
        assert b"http://" not in body and b"https://" not in body and b"//cdn" not in body, name
    status, state = get(url + "api/state")
    assert status == 200 and state["source"] == "human:ana" and len(state["pairs"]) == len(session.pool)
    assert state["filter"] is False
    pair = session.pool[0]
    body = {"question": pair.question, "document": pair.document, "grade": 2}
    # Another site: rebound to 127.0.0.1 (its own Host), or posting from its page (its Origin, no header).
    assert get(url + "api/state", {"Host": "attacker.example:80"})[0] == 421
    assert post(url + "api/judge", body, {"Origin": "https://attacker.example"})[0] == 403
    request_without_header = post(url + "api/judge", body, {"X-Judging-Page": ""})
    assert request_without_header == (403, {"error": "a write needs the page's X-Judging-Page header and a JSON body"})
    assert not session.path.exists()
    status, answer = post(url + "api/judge", body, {"Origin": url.rstrip("/")})
    assert status == 200 and answer["judgment"]["grade"] == 2
    assert [j.grade for j in read_judgments(session.path)] == [2]
    assert get(url + "api/pair/100000")[0] == 404
    assert post(url + "api/nothing", body)[0] == 404
    status, answer = post(url + "api/judge", {**body, "grade": 9})
    assert (status, answer) == (400, {"error": "grade 9: give 0, 1, 2 or 3"})


def test_a_damaged_judgments_file_is_said_and_not_overwritten(server: JudgingServer, session: JudgingSession) -> None:
    session.path.write_text('{"question": "q01"\n', encoding="utf-8")
    pair = session.pool[0]
    status, answer = post(server.url + "api/judge", {"question": pair.question, "document": pair.document, "grade": 1})
    assert status == 500 and answer["error"].startswith(f"not saved: {session.path}:1: invalid JSON")
    assert session.path.read_text(encoding="utf-8") == '{"question": "q01"\n'
    assert json.loads(json.dumps(answer))  # the page shows it as the server said it
