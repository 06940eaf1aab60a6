"""Spaced retrieval: when each concept a student got wrong comes back for practice (FSRS, the ``fsrs`` package).

One :class:`Entry` per student and concept (:mod:`grader.student.quiz.concepts`). A *miss* (a graded upload
that names a mistake of that concept, or a wrong practice answer) is FSRS's rating ``Again``; a *clean
retrieval* (a right practice answer) is ``Good``. The scheduler has no same-day learning steps and no
fuzzing, so a missed concept is due again one day later (FSRS's first interval after ``Again``) and each
clean retrieval pushes the next one further out (FSRS's stability grows). A concept is **mastered** after
:data:`MASTERY_STREAK` (2) clean retrievals in a row; a miss sets the streak back to 0 and the mastery off.

Every review is a :class:`Review` in the student's *review log* (the store's ``practice_reviews``), and a
concept's entry is the **replay** of its reviews in time order (:func:`replay`): the schedule is a function of
the log. Time is always passed in (``now``, timezone-aware UTC): nothing here reads the clock. Log and entries
are kept in the progress store (:meth:`grader.student.store.Store.practice_reviews`, ``practice_entries``), on
the server and in the handout alike; on login :func:`merge_logs` unions the two logs (a review id once) and each
concept with reviews is replayed from the union (:func:`schedule_of`), so a merge loses no review and merging
again changes nothing. Only an entry kept before the log (schema version 12) has no reviews: :func:`merge` keeps
the one reviewed last.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

MASTERY_STREAK = 2
RATINGS = ("again", "good")  # FSRS's ratings a review gives: a miss, a clean retrieval
ORIGINS = ("local", "server")  # where a review was made: the handout's store, the course server


@dataclass(frozen=True)
class Entry:
    """One concept's schedule: FSRS's card (as its dict), when it is due, the clean streak, mastery."""

    concept: str
    card: dict[str, Any]
    due: datetime
    streak: int = 0
    mastered: bool = False
    reviewed: datetime | None = None


UNAVAILABLE = (
    "practice needs the FSRS scheduler (the `fsrs` package: the handout installs it; the instructor's "
    "repository with the `learning` extra)"
)


def available() -> bool:
    """Whether the scheduler (``fsrs``) is installed: without it nothing is scheduled, never a failed upload."""
    return importlib.util.find_spec("fsrs") is not None


def _scheduler() -> Any:
    from fsrs import Scheduler

    return Scheduler(learning_steps=(), relearning_steps=(), enable_fuzzing=False)


def _review(entry: Entry | None, concept: str, right: bool, now: datetime) -> Entry:
    from fsrs import Card, Rating

    if now.tzinfo is None:
        raise ValueError("practice times must be timezone-aware (UTC)")
    now = now.astimezone(timezone.utc)
    card = Card.from_dict(entry.card) if entry else Card(card_id=0, due=now)  # type: ignore[arg-type]
    card, _ = _scheduler().review_card(card, Rating.Good if right else Rating.Again, now)
    streak = (entry.streak if entry else 0) + 1 if right else 0
    return Entry(concept, dict(card.to_dict()), card.due, streak, streak >= MASTERY_STREAK, now)


@dataclass(frozen=True)
class Review:
    """One review in the log: its unique ``id``, the concept, the question asked (``chapter/id``; None for a
    graded upload's miss), ``right`` (FSRS ``Good``) or not (``Again``), when, and where it was made
    (:data:`ORIGINS`)."""

    id: str
    concept: str
    question: str | None
    right: bool
    at: datetime
    origin: str


def new_review(concept: str, question: str | None, right: bool, now: datetime, origin: str) -> Review:
    """A review made now, under a fresh random id (so two sides' reviews never share one)."""
    import uuid

    if now.tzinfo is None:
        raise ValueError("practice times must be timezone-aware (UTC)")
    return Review(uuid.uuid4().hex, concept, question, right, now.astimezone(timezone.utc), origin)


def review_row(review: Review) -> dict[str, Any]:
    """The store's (and the merge's) row of a review: ``id, concept, question, rating, reviewed_at, origin``."""
    return {
        "id": review.id,
        "concept": review.concept,
        "question": review.question,
        "rating": "good" if review.right else "again",
        "reviewed_at": review.at.isoformat(),
        "origin": review.origin,
    }


REVIEW_ID_CHARS = frozenset("0123456789abcdef")


def review_from_row(row: Any) -> Review:
    """A review from its row (:func:`review_row`); ValueError, with what is wrong, for a row that is not one: other
    fields, an id that is not 32 hex digits, a rating not in :data:`RATINGS`, an origin not in :data:`ORIGINS`, a
    time without its zone."""
    if not isinstance(row, dict) or set(row) != {"id", "concept", "question", "rating", "reviewed_at", "origin"}:
        raise ValueError("a review row has exactly id, concept, question, rating, reviewed_at, origin")
    ident, concept, question = row["id"], row["concept"], row["question"]
    if not (isinstance(ident, str) and len(ident) == 32 and set(ident) <= REVIEW_ID_CHARS):
        raise ValueError("a review id is 32 hex digits")
    if not isinstance(concept, str) or not (question is None or isinstance(question, str)):
        raise ValueError("a review's concept is text, its question text or null")
    if row["rating"] not in RATINGS or row["origin"] not in ORIGINS:
        raise ValueError(f"a review's rating is one of {', '.join(RATINGS)}, its origin one of {', '.join(ORIGINS)}")
    at = datetime.fromisoformat(row["reviewed_at"]) if isinstance(row["reviewed_at"], str) else None
    if at is None or at.tzinfo is None:
        raise ValueError("a review's reviewed_at is an ISO 8601 time with its zone")
    return Review(ident, concept, question, row["rating"] == "good", at.astimezone(timezone.utc), row["origin"])


def replay(concept: str, reviews: list[Review]) -> Entry:
    """The concept's entry: its reviews replayed through FSRS from a new card, in time order (the id breaks a tie),
    so the same reviews give the same entry whichever side holds them."""
    entry: Entry | None = None
    for review in sorted((r for r in reviews if r.concept == concept), key=lambda r: (r.at, r.id)):
        entry = _review(entry, concept, review.right, review.at)
    if entry is None:
        raise ValueError(f"no review of {concept} to replay")
    return entry


def schedule_of(reviews: list[Review]) -> list[Entry]:
    """One entry per concept with reviews (:func:`replay`), in concept order."""
    return [replay(concept, reviews) for concept in sorted({r.concept for r in reviews})]


def merge_logs(local: list[Review], held: list[Review]) -> list[Review]:
    """The union of two review logs, each review id once, in time order. ValueError when the two sides hold one id
    with different contents (a forged or altered review)."""
    union: dict[str, Review] = {}
    for review in [*held, *local]:
        kept = union.setdefault(review.id, review)
        if kept != review:
            raise ValueError(f"review {review.id} differs from the one with that id already kept")
    return sorted(union.values(), key=lambda r: (r.at, r.id))


def missed(entry: Entry | None, concept: str, now: datetime) -> Entry:
    """A mistake of ``concept`` at ``now``: due again a day later, streak 0, not mastered."""
    return _review(entry, concept, False, now)


def retrieved(entry: Entry, right: bool, now: datetime) -> Entry:
    """A practice answer on the entry's concept at ``now``: right is a clean retrieval, wrong is a miss."""
    return _review(entry, entry.concept, right, now)


def due_today(entries: list[Entry], now: datetime) -> list[Entry]:
    """The entries not yet mastered and due by the end of ``now``'s UTC day, the earliest first."""
    end = now.astimezone(timezone.utc).replace(hour=23, minute=59, second=59, microsecond=999999)
    return sorted((e for e in entries if not e.mastered and e.due <= end), key=lambda e: (e.due, e.concept))


def merge(local: list[Entry], remote: list[Entry]) -> list[Entry]:
    """One entry per concept: the one reviewed last (the remote one on a tie), in concept order (the rule for
    entries kept before the review log; :func:`merge_entries`)."""
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    chosen: dict[str, Entry] = {}
    for entry in [*local, *remote]:
        held = chosen.get(entry.concept)
        if held is None or (entry.reviewed or epoch) >= (held.reviewed or epoch):
            chosen[entry.concept] = entry
    return [chosen[c] for c in sorted(chosen)]


def merge_entries(log: list[Review], local: list[Entry], remote: list[Entry]) -> list[Entry]:
    """The schedule after a merge whose union log is ``log``: each concept with reviews replayed from them
    (:func:`schedule_of`), each concept without (an entry kept before the log) by :func:`merge`; concept order."""
    replayed = {e.concept: e for e in schedule_of(log)}
    kept = {e.concept: e for e in merge(local, remote) if e.concept not in replayed}
    return [{**kept, **replayed}[c] for c in sorted({*kept, *replayed})]


def to_row(entry: Entry) -> dict[str, Any]:
    """The store's row of an entry (times as ISO 8601 text, the card as its JSON)."""
    import json

    return {
        "concept": entry.concept,
        "card": json.dumps(entry.card, sort_keys=True),
        "due": entry.due.isoformat(),
        "streak": entry.streak,
        "mastered": int(entry.mastered),
        "reviewed": entry.reviewed.isoformat() if entry.reviewed else None,
    }


def usable(entry: Entry) -> bool:
    """Whether an entry that came from elsewhere (a merge) can be scheduled: times with their zone, FSRS's card."""
    from fsrs import Card

    try:
        Card.from_dict(entry.card)  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
    return entry.due.tzinfo is not None and (entry.reviewed is None or entry.reviewed.tzinfo is not None)


def from_row(row: dict[str, Any]) -> Entry:
    """An entry from its store row (:func:`to_row`)."""
    import json

    return Entry(
        row["concept"],
        json.loads(row["card"]),
        datetime.fromisoformat(row["due"]),
        int(row["streak"]),
        bool(row["mastered"]),
        datetime.fromisoformat(row["reviewed"]) if row["reviewed"] else None,
    )


def practice_offer(mistakes: list[tuple[str, str]]) -> list[tuple[str, tuple[str, ...]]]:
    """ "Practice this" after a graded upload: each concept of the named ``(mistake id, exercise)``\\ s, once, with
    its questions (``chapter/question-id``), in the order the mistakes came."""
    from grader.student.quiz.concepts import concept_of

    offer: dict[str, tuple[str, ...]] = {}
    for mistake, exercise in mistakes:
        concept = concept_of(mistake, exercise)
        if concept is not None and concept.id not in offer:
            offer[concept.id] = concept.questions
    return list(offer.items())


def report_offer(exercise: Any) -> list[str]:
    """The titles of the concepts a report's exercise (``ExerciseResult``) offers to practise: those of its failing
    checks' named mistakes, once each (the report's "practice this" line, text and page alike)."""
    mistakes = [(c.misconception, exercise.id) for c in exercise.checks if not c.passed and c.misconception]
    return [_title(concept) for concept, _ in practice_offer(mistakes)]


def report_line(exercise: Any) -> str | None:
    """The text report's "practice this" line of an exercise, or None when it names no mistake."""
    titles = report_offer(exercise)
    return (
        f"Practice this (not graded, no attempts spent): {'; '.join(titles)}. Run `grade practice`." if titles else None
    )


def record_mistakes(entries: list[Entry], mistakes: list[tuple[str, str]], now: datetime) -> list[Entry]:
    """The schedule after a graded upload at ``now`` named ``mistakes``: each of their concepts is missed once."""
    held = {e.concept: e for e in entries}
    for concept, _ in practice_offer(mistakes):
        held[concept] = missed(held.get(concept), concept, now)
    return [held[c] for c in sorted(held)]


def practice_lines(offer: list[tuple[str, tuple[str, ...]]], due: list[str]) -> list[str]:
    """``grade progress``'s "practice this" and "due today" lines, offline and from the server alike: ``offer`` as
    (concept title, its questions), ``due`` the titles of the concepts due today."""
    lines = []
    if offer:
        lines.append("Practice this (not graded, no attempts spent): `grade practice` asks these:")
        lines += [f"  {title}: {', '.join(questions)}" for title, questions in offer]
    if due:
        lines.append(f"Due today ({len(due)}): " + ", ".join(due))
    return lines


def _title(concept: str) -> str:
    from grader.student.quiz.concepts import CONCEPTS

    return CONCEPTS[concept].title if concept in CONCEPTS else concept


def progress_lines(store: Any, student: str, now: datetime) -> list[str]:
    """``grade progress``'s practice lines (:func:`practice_lines`) from the store (``Store``): the questions of
    the concepts the student's current submissions show mistakes in, and the scheduled concepts due today."""
    offer = practice_offer([(row["misconception"], row["exercise"]) for row in store.current_mistakes(student)])
    due = due_today([from_row(row) for row in store.practice_entries(student)], now)
    return practice_lines([(_title(c), questions) for c, questions in offer], [_title(e.concept) for e in due])


def to_practise(store: Any, student: str, now: datetime, shown: Callable[[str], bool] | None = None) -> list[str]:
    """The concepts a practice session asks now, each once: those due today (:func:`due_today`), then those
    of the student's current mistakes (:func:`practice_offer`) without a clean retrieval since they were missed
    (streak 0: a right answer puts them on the schedule, where they come back when due). ``shown(exercise)``:
    whether the student may see that exercise's mistakes now (the server's exam mode); None: all."""
    entries = {e.concept: e for e in (from_row(row) for row in store.practice_entries(student))}
    due = [e.concept for e in due_today(list(entries.values()), now)]
    offer = practice_offer(
        [
            (row["misconception"], row["exercise"])
            for row in store.current_mistakes(student)
            if shown is None or shown(row["exercise"])
        ]
    )
    fresh = [c for c, _ in offer if c not in entries or entries[c].streak == 0]
    return list(dict.fromkeys(due + fresh))


def question_for(concept: str, streak: int, available: set[str]) -> str | None:
    """The question (``chapter/question-id``) a session asks of ``concept``: of its questions in ``available``
    (those that can be judged where the practice runs), the one at the clean streak's turn, so two clean
    retrievals in a row answer two different questions; None when none is available."""
    from grader.student.quiz.concepts import CONCEPTS

    concept_ = CONCEPTS.get(concept)
    usable = [q for q in concept_.questions if q in available] if concept_ else []
    return usable[streak % len(usable)] if usable else None


def streak_of(store: Any, student: str, concept: str) -> int:
    """The concept's clean streak in the student's schedule (0 when it is not on it)."""
    row = next((r for r in store.practice_entries(student) if r["concept"] == concept), None)
    return int(row["streak"]) if row else 0


def record_reviews(store: Any, student: str, reviews: list[Review]) -> list[Entry]:
    """Append ``reviews`` to the student's log in ``store`` (``Store``) and replay each of their concepts from its
    whole log (:func:`replay`; an entry kept before the log is replaced by the replay): the new entries, kept,
    in concept order."""
    concepts = sorted({r.concept for r in reviews})
    held = [review_from_row(row) for concept in concepts for row in store.practice_reviews(student, concept)]
    entries = schedule_of(merge_logs(reviews, held))
    store.save_practice_entries(student, [to_row(e) for e in entries], [review_row(r) for r in reviews])
    return entries


def record_practice(
    store: Any, student: str, concept: str, right: bool, now: datetime, *, question: str, origin: str
) -> Entry:
    """A practice answer to ``question`` on ``concept`` judged at ``now`` where ``origin`` says is a review: right
    a clean retrieval (FSRS ``Good``), wrong a miss (``Again``); logged, the concept replayed
    (:func:`record_reviews`) and its new entry returned."""
    (entry,) = record_reviews(store, student, [new_review(concept, question, right, now, origin)])
    return entry


def record_report(store: Any, report: Any, now: datetime, origin: str = "local") -> None:
    """After a graded upload was recorded: each concept of the report's named mistakes (a failing check's
    ``misconception``) is missed at ``now`` (a review without a question, made where ``origin`` says) in the
    student's schedule in ``store`` (``Store``)."""
    mistakes = [
        (check.misconception, exercise.id)
        for exercise in report.exercises
        for check in exercise.checks
        if not check.passed and check.misconception
    ]
    if not mistakes or not available():
        return  # nothing named, or a handout installed before it needed fsrs: no schedule, never a failed upload
    record_reviews(
        store,
        report.student,
        [new_review(concept, None, False, now, origin) for concept, _ in practice_offer(mistakes)],
    )
