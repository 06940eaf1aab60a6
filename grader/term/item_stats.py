"""Item statistics of the quizzes: what an instructor can act on, per question and per parameterised variant.

The input is one :class:`Response` per student and question (which variant they were drawn, the choice
they gave, whether it was right). For each question (:func:`item_stats`):

- **facility** p = (right answers) / (answers);
- **discrimination** D = the correlation of the item's score (0/1) with the student's *rest score* (the
  share right of their other questions): the corrected point-biserial; D < 0 is flagged
  (``negative_discrimination``): the stronger students get it wrong more often;
- **distractors**: the share of the answers choosing each wrong choice, with the misconception that
  choice stands for where the caller names it;
- **variants**: each variant's facility, flagged ``unfair`` when it differs from its siblings' pooled
  facility by more than :data:`UNFAIR_GAP` (0.15).

Where the class holds at least :data:`IRT_MIN_STUDENTS` students, :func:`fit_2pl` fits a two-parameter
logistic model P(right | θ) = 1 / (1 + exp(-a (θ - b))) per item, by marginal maximum likelihood with
θ ~ N(0, 1) integrated over :data:`NODES` Gauss-Hermite nodes (SciPy's L-BFGS-B on the analytic gradient);
the standard errors are the square roots of the diagonal of the inverse observed information, estimated
as the sum over students of the outer products of their score vectors (the cross-product estimate).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

UNFAIR_GAP = 0.15
IRT_MIN_STUDENTS = 200
NODES = 41


@dataclass(frozen=True)
class Response:
    """One student's answer to one question; ``variant`` is the parameterised draw ("" for a fixed one)."""

    student: str
    question: str
    correct: bool
    choice: str | None = None
    variant: str = ""


@dataclass
class Distractor:
    choice: str
    share: float
    misconception: str | None


@dataclass
class Variant:
    variant: str
    answers: int
    facility: float
    siblings_facility: float | None
    unfair: bool


@dataclass
class ItemStats:
    question: str
    answers: int
    facility: float
    discrimination: float | None
    negative_discrimination: bool
    distractors: list[Distractor] = field(default_factory=list)
    variants: list[Variant] = field(default_factory=list)


@dataclass
class IrtItem:
    question: str
    a: float
    b: float
    se_a: float
    se_b: float


def _rest_scores(responses: list[Response]) -> dict[tuple[str, str], float]:
    """(student, question) -> the share right of that student's other questions."""
    right: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    for r in responses:
        right[r.student] += r.correct
        total[r.student] += 1
    return {
        (r.student, r.question): (right[r.student] - r.correct) / (total[r.student] - 1)
        for r in responses
        if total[r.student] > 1
    }


def _correlation(x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 3 or x.std() == 0 or y.std() == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def item_stats(responses: list[Response], misconceptions: dict[tuple[str, str], str] | None = None) -> list[ItemStats]:
    """The statistics of each question (sorted by id); ``misconceptions[(question, choice)]`` names distractors."""
    misconceptions = misconceptions or {}
    rest = _rest_scores(responses)
    by_question: dict[str, list[Response]] = defaultdict(list)
    for r in responses:
        by_question[r.question].append(r)
    out = []
    for question, answers in sorted(by_question.items()):
        scored = [(float(r.correct), rest[(r.student, question)]) for r in answers if (r.student, question) in rest]
        d = _correlation(*map(np.array, zip(*scored, strict=True))) if scored else None
        wrong_choices: dict[str, int] = defaultdict(int)
        for r in answers:
            if not r.correct and r.choice is not None:
                wrong_choices[r.choice] += 1
        distractors = [
            Distractor(c, n / len(answers), misconceptions.get((question, c)))
            for c, n in sorted(wrong_choices.items(), key=lambda kv: (-kv[1], kv[0]))
        ]
        out.append(
            ItemStats(
                question,
                len(answers),
                sum(r.correct for r in answers) / len(answers),
                d,
                d is not None and d < 0,
                distractors,
                _variants(answers),
            )
        )
    return out


def _variants(answers: list[Response]) -> list[Variant]:
    """Each variant's facility against its siblings' pooled facility; unfair when they differ by > UNFAIR_GAP."""
    groups: dict[str, list[bool]] = defaultdict(list)
    for r in answers:
        groups[r.variant].append(r.correct)
    if len(groups) < 2:
        return []
    out = []
    for variant, marks in sorted(groups.items()):
        others = [m for v, ms in groups.items() if v != variant for m in ms]
        facility = sum(marks) / len(marks)
        siblings = sum(others) / len(others)
        out.append(Variant(variant, len(marks), facility, siblings, abs(facility - siblings) > UNFAIR_GAP))
    return out


def _matrix(responses: list[Response]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The questions, and the students x questions matrices of scores and of 'answered' (a mask)."""
    students = sorted({r.student for r in responses})
    questions = sorted({r.question for r in responses})
    row = {s: i for i, s in enumerate(students)}
    col = {q: j for j, q in enumerate(questions)}
    x = np.zeros((len(students), len(questions)))
    seen = np.zeros_like(x)
    for r in responses:
        x[row[r.student], col[r.question]] = r.correct
        seen[row[r.student], col[r.question]] = 1.0
    return questions, x, seen


def _loglik_and_scores(
    params: np.ndarray, x: np.ndarray, seen: np.ndarray, theta: np.ndarray, weight: np.ndarray
) -> tuple[float, np.ndarray]:
    """The marginal log-likelihood, and each student's score vector (d log L_i / d (a, b)), shape (N, 2J)."""
    j = x.shape[1]
    a, b = params[:j], params[j:]
    p = 1.0 / (1.0 + np.exp(-a[None, :] * (theta[:, None] - b[None, :])))  # (Q, J)
    p = np.clip(p, 1e-12, 1 - 1e-12)
    log_p = (x * seen) @ np.log(p).T + ((1 - x) * seen) @ np.log(1 - p).T  # (N, Q)
    log_joint = log_p + np.log(weight)[None, :]
    top = log_joint.max(axis=1, keepdims=True)
    marginal = top[:, 0] + np.log(np.exp(log_joint - top).sum(axis=1))
    post = np.exp(log_joint - marginal[:, None])  # (N, Q): each student's posterior over the nodes
    # d log L_i / d a_j = seen_ij E_i[(x_ij - p_j(θ)) (θ - b_j)];  d log L_i / d b_j = -a_j seen_ij E_i[x_ij - p_j(θ)]
    e_p = post @ p  # (N, J)
    e_p_centred = post @ (p * (theta[:, None] - b[None, :]))  # (N, J)
    e_centred = (post @ theta)[:, None] - b[None, :]  # (N, J)
    grad_a = seen * (x * e_centred - e_p_centred)
    grad_b = -a[None, :] * seen * (x - e_p)
    return float(marginal.sum()), np.hstack([grad_a, grad_b])


def fit_2pl(responses: list[Response]) -> list[IrtItem] | None:
    """The 2PL fit of each question with standard errors, or None under IRT_MIN_STUDENTS students."""
    from scipy.optimize import minimize

    questions, x, seen = _matrix(responses)
    if x.shape[0] < IRT_MIN_STUDENTS:
        return None
    nodes, weights = np.polynomial.hermite_e.hermegauss(NODES)  # for exp(-θ²/2)
    weights = weights / weights.sum()
    j = len(questions)

    def objective(params: np.ndarray) -> tuple[float, np.ndarray]:
        value, scores = _loglik_and_scores(params, x, seen, nodes, weights)
        return -value, -scores.sum(axis=0)

    start = np.concatenate([np.ones(j), np.zeros(j)])
    bounds = [(-8.0, 8.0)] * j + [(-6.0, 6.0)] * j
    fit = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=bounds)
    _, scores = _loglik_and_scores(fit.x, x, seen, nodes, weights)
    covariance = np.linalg.pinv(scores.T @ scores)
    se = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    return [
        IrtItem(q, float(fit.x[k]), float(fit.x[j + k]), float(se[k]), float(se[j + k]))
        for k, q in enumerate(questions)
    ]


def responses_of(rows: list[dict[str, Any]]) -> list[Response]:
    """The responses of the store's quiz answer rows (``Store.quiz_answer_rows``, oldest first): each student's
    *first* answer to each question (``chapter/id``), its drawn values as the variant ("" for a fixed question),
    and the answer as the choice (for a choice question it is the choice's id)."""
    first: dict[tuple[str, str], Response] = {}
    for row in rows:
        question = f"{row['chapter']}/{row['question']}"
        first.setdefault(
            (row["student"], question),
            Response(
                row["student"], question, bool(row["correct"]), str(row.get("answer") or ""), row.get("params") or ""
            ),
        )
    return list(first.values())
