"""`grade similarity`: the latest upload of every student per topic compared with copydetect, the released stubs
removed as boilerplate; copies (also renamed and reformatted) found, independent solutions and stubs not."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.term import similarity
from grader.cli import cli
from grader.queue import records
from grader.student.course import DEFAULT_COURSE
from grader.student.store import Store
from bench.similarity import rename_and_reformat  # bench/similarity.py: how a copy is disguised

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = REPO / "bench" / "similarity_class"  # independent solutions of the dropout stub
STUB = (REPO / "exercises" / "dropout.py").read_text(encoding="utf-8")


def solution(k: int) -> str:
    return (SOLUTIONS / f"dropout_{k}.py").read_text(encoding="utf-8")


def class_db(tmp_path: Path, texts: dict[str, str]) -> Path:
    db = tmp_path / "course.db"
    with Store.open(db) as store:
        for name, text in texts.items():
            records.create_job(
                store, name, f"k-{name}", {"dropout.py": text}, [], DEFAULT_COURSE, datetime.now(timezone.utc)
            )
    return db


def pairs_of(db: Path, threshold: float = similarity.THRESHOLD) -> dict[tuple[str, str], float]:
    with Store.open(db) as store:
        return {(p.a, p.b): p.share for p in similarity.find_pairs(store, ["dropout"], threshold)}


def test_copies_are_found_and_independent_solutions_are_not(tmp_path: Path) -> None:
    texts = {f"s{k}": solution(k) for k in range(1, 7)}
    texts["copy"] = solution(2)
    texts["disguised"] = rename_and_reformat(solution(4))
    assert "self .m " not in texts["disguised"] and "  def forward" in texts["disguised"]  # really disguised
    found = pairs_of(class_db(tmp_path, texts))
    assert set(found) == {("copy", "s2"), ("disguised", "s4")}, found


def test_the_released_stub_is_boilerplate(tmp_path: Path) -> None:
    """Two students who hand in the untouched stub share nothing that counts (the stub at every level)."""
    found = pairs_of(class_db(tmp_path, {"a": STUB, "b": STUB, "c": solution(1)}), threshold=0.05)
    assert found == {}
    with Store.open(tmp_path / "course.db"):  # without the stubs as boilerplate they would match fully
        shared = similarity.compare("dropout", {"a": (1, STUB), "b": (2, STUB)}, None, 0.05)
    assert shared and shared[0].share == 1.0


def test_only_the_latest_upload_of_each_student_counts(tmp_path: Path) -> None:
    db = class_db(tmp_path, {"a": solution(1), "b": solution(1)})
    assert ("a", "b") in pairs_of(db)
    with Store.open(db) as store:
        records.create_job(
            store, "b", "k-b2", {"dropout.py": solution(5)}, [], DEFAULT_COURSE, datetime.now(timezone.utc)
        )
    assert pairs_of(db) == {}


def test_side_by_side_segments_cover_the_text_and_mark_the_matches() -> None:
    text = "abcdefghij"
    pieces = list(similarity.segments(text, [(2, 4), (3, 6), (8, 20)]))
    assert "".join(p for p, _ in pieces) == text
    assert [p for p, matched in pieces if matched] == ["cd", "ef", "ij"]


def test_the_cli_lists_pairs_and_says_what_a_match_means(tmp_path: Path) -> None:
    db = class_db(tmp_path, {"a": solution(3), "b": solution(3), "c": solution(6)})
    runner = CliRunner()
    text = runner.invoke(cli, ["similarity", "--db", str(db), "dropout"])
    assert text.exit_code == 0, text.output
    assert "1 pair at or above 60% similar" in text.output and "dropout" in text.output
    assert "not a finding of misconduct" in text.output
    doc = json.loads(runner.invoke(cli, ["similarity", "--db", str(db), "--json"]).output)
    assert [(p["a"], p["b"]) for p in doc["pairs"]] == [("a", "b")]
    bad = runner.invoke(cli, ["similarity", "--db", str(db), "kernels"])
    assert bad.exit_code == 2 and "'kernels' is not a Python topic" in bad.output
    missing = runner.invoke(cli, ["similarity", "--db", str(tmp_path / "no.db")])
    assert missing.exit_code == 2 and "does not exist" in missing.output


@pytest.mark.parametrize("threshold", ["0", "1.5"])
def test_a_threshold_outside_zero_to_one_is_refused(tmp_path: Path, threshold: str) -> None:
    db = class_db(tmp_path, {"a": solution(1)})
    result = CliRunner().invoke(cli, ["similarity", "--db", str(db), "--threshold", threshold])
    assert result.exit_code == 2 and "--threshold" in result.output


def test_the_dashboard_page_and_the_side_by_side_view(tmp_path: Path) -> None:
    import warnings

    from grader.server.app import ServerConfig

    from grader.server.web import create_app
    from server_util import issue_tokens

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    db = class_db(tmp_path, {"a": solution(3) + "\n# <script>alert(1)</script>\n", "b": solution(3), "c": solution(6)})
    _, teacher = issue_tokens(db, ["a", "b", "c"])
    app = create_app(ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}"), run_collector=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        headers = {"Authorization": f"Bearer {teacher}"}
        page = client.get("/instructor/similarity", headers=headers)
        assert page.status_code == 200 and "not a finding of misconduct" in page.text
        assert "/instructor/similarity/dropout/a/b" in page.text and "/dropout/a/c" not in page.text
        pair = client.get("/instructor/similarity/dropout/a/b", headers=headers)
        assert pair.status_code == 200 and pair.text.count("<mark>") >= 2
        assert "<script>alert" not in pair.text and "&lt;script&gt;" in pair.text
        assert client.get("/instructor/similarity/dropout/a/c", headers=headers).status_code == 404


def test_without_copydetect_both_similarity_pages_say_so_with_503(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list page and a pair's page alike: 503 and the extra to install, never a 500."""
    import warnings

    from grader.server.app import ServerConfig

    from grader.server.web import create_app
    from server_util import issue_tokens

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    def missing() -> None:
        raise similarity.SimilarityError("similarity needs copydetect: pip install 'normgrade[similarity]'")

    monkeypatch.setattr(similarity, "_detector", missing)
    db = class_db(tmp_path, {"a": solution(3), "b": solution(3)})
    _, teacher = issue_tokens(db, ["a", "b"])
    app = create_app(ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}"), run_collector=False)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        headers = {"Authorization": f"Bearer {teacher}"}
        for path in ("/instructor/similarity", "/instructor/similarity/dropout/a/b"):
            page = client.get(path, headers=headers)
            assert page.status_code == 503 and "needs copydetect" in page.text, (path, page.status_code)
