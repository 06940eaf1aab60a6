"""Reports: the human text (hint first, no false pass, colour rules), --json, Gradescope results.json."""

from __future__ import annotations

import io
import json
import sys
import types  # noqa: F401
from pathlib import Path

import pytest

from grader.student.engine import diagnosis
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.feedback.report import (
    format_json,
    format_score,
    format_text,
    gradescope_error,
    gradescope_results,
    use_color,
    write_json,
)

SENTENCE = "The running variance was updated with the biased batch variance."
FIX = "Multiply the batch variance by m/(m-1) before the running update."
DIFF = "running_var differs at [2]: received 0.81, expected 0.9"


@pytest.fixture
def catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    """One known mistake registered for reports (as the mistake catalogue or a case pack registers them)."""
    monkeypatch.setitem(
        diagnosis.KNOWN,
        "bn-biased-running-var",
        diagnosis.KnownMistake("bn-biased-running-var", "normalization.BatchNorm1d", SENTENCE, FIX),
    )


def sample_report() -> GradeReport:
    bn = ExerciseResult(
        "normalization.BatchNorm1d",
        "failed",
        8.0,
        10.0,
        [
            CheckResult("forward_train", True, 6.0, 6.0, "ok"),
            CheckResult("running_var_ema", False, 0.0, 2.0, DIFF, "bn-biased-running-var"),
            CheckResult("backward", True, 2.0, 2.0),
        ],
    )
    relu = ExerciseResult("activations.ReLU", "passed", 10.0, 10.0, [CheckResult("forward", True, 10.0, 10.0)])
    gelu = ExerciseResult(
        "activations.GELU",
        "not_implemented",
        0.0,
        10.0,
        [CheckResult("forward", False, 0.0, 10.0, "NotImplementedError")],
    )
    crash = ExerciseResult(
        "dropout.Dropout",
        "error",
        0.0,
        10.0,
        [],
        message="The child process crashed (exit code -11) while running dropout.Dropout.",
        output="\n".join(f"debug line {i}" for i in range(30)),
    )
    return GradeReport("alice", [bn, relu, gelu, crash], "hash")


def test_text_report_lines_per_exercise_and_total(catalogue: None) -> None:
    text = format_text(sample_report())
    lines = text.splitlines()
    assert lines[0] == "normgrade report for alice"
    bn_line = next(line for line in lines if "normalization.BatchNorm1d" in line)
    assert bn_line.split()[0] == "FAILED" and bn_line.endswith("8/10")
    relu_line = next(line for line in lines if "activations.ReLU" in line)
    assert relu_line.split()[0] == "PASSED" and relu_line.endswith("10/10")
    assert next(line for line in lines if "activations.GELU" in line).split()[0] == "NOT_IMPLEMENTED"
    assert next(line for line in lines if "dropout.Dropout" in line).split()[0] == "ERROR"
    assert lines[-1] == "This upload: 18/40 (45.0%), 1 of 4 exercises at full marks"
    assert "\x1b[" not in text


def test_diagnosis_comes_before_the_difference(catalogue: None) -> None:
    text = format_text(sample_report())
    check_at = text.index("running_var_ema (0/2)")
    diagnosis_at = text.index(f"Likely mistake (bn-biased-running-var): {SENTENCE}")
    fix_at = text.index(f"Fix: {FIX}")
    diff_at = text.index(DIFF)
    assert diagnosis_at < fix_at < check_at < diff_at
    assert "forward_train" not in text  # passing checks are not listed


def test_a_named_mistake_offers_its_concepts_practice_in_the_text_and_the_page(catalogue: None) -> None:
    from grader.student.feedback.report_html import format_html

    text = format_text(sample_report())
    offer = (
        "Practice this (not graded, no attempts spent): BatchNorm's running statistics and momentum. "
        "Run `grade practice`."
    )
    assert text.count(offer) == 1  # the BatchNorm1d's mistake; the crash names none, the others passed or wait
    assert text.index("Read §normalization.batchnorm-running-stats") < text.index(offer)  # the mistake's section
    page = format_html(sample_report())
    assert "Practice this (not graded, no attempts spent): BatchNorm&#x27;s running statistics" in page


def test_a_mistake_named_by_several_checks_is_printed_once(catalogue: None) -> None:
    report = sample_report()
    bn = report.exercises[0]
    bn.checks.append(CheckResult("eval_forward", False, 0.0, 1.0, "y differs", "bn-biased-running-var"))
    text = format_text(report)
    assert text.count(SENTENCE) == 1
    assert text.index(SENTENCE) < text.index("running_var_ema (0/2)") < text.index("eval_forward (0/1)")
    assert "y differs" in text


def test_diagnosis_not_repeated_when_the_message_carries_it(catalogue: None) -> None:
    message = f"Known mistake bn-biased-running-var: {SENTENCE} Fix: {FIX}\n{DIFF}"
    report = GradeReport(
        "bob",
        [
            ExerciseResult(
                "normalization.BatchNorm1d",
                "failed",
                8.0,
                10.0,
                [CheckResult("running_var_ema", False, 0.0, 2.0, message, "bn-biased-running-var")],
            )
        ],
    )
    text = format_text(report)
    assert text.count(SENTENCE) == 1 and text.count(FIX) == 1
    assert text.index(SENTENCE) < text.index(DIFF)


def test_unknown_mistake_id_is_still_named(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("grader.mistakes")
    vars(fake)["CATALOGUE"] = {}
    monkeypatch.setitem(sys.modules, "grader.mistakes", fake)
    report = GradeReport(
        "bob",
        [ExerciseResult("x.Y", "failed", 0.0, 10.0, [CheckResult("c", False, 0.0, 10.0, "differs", "some-mistake")])],
    )
    text = format_text(report)
    assert text.index("Likely mistake: some-mistake.") < text.index("differs")


def test_error_shows_its_reason_and_the_end_of_the_output(catalogue: None) -> None:
    text = format_text(sample_report())
    assert "The child process crashed (exit code -11)" in text
    assert "What your code printed (last lines):" in text
    assert "debug line 29" in text and "debug line 22" in text
    assert "debug line 21" not in text


def test_not_implemented_says_so_without_listing_checks(catalogue: None) -> None:
    text = format_text(sample_report())
    assert "NOT_IMPLEMENTED: 1 exercise(s) still raise NotImplementedError: implement them in activations.py." in text
    assert "forward (0/10)" not in text


def test_status_passed_without_full_marks_is_never_shown_as_pass() -> None:
    report = GradeReport("bob", [ExerciseResult("x.Y", "passed", 9.5, 10.0)])
    line = format_text(report).splitlines()[1]
    assert line.split()[0] == "FAILED" and line.endswith("9.5/10")


def test_colour_only_when_asked(catalogue: None) -> None:
    assert "\x1b[" in format_text(sample_report(), color=True)
    assert "\x1b[" not in format_text(sample_report(), color=False)


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_use_color_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(FakeTTY()) is True
    assert use_color(io.StringIO()) is False  # piped
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(FakeTTY()) is False


def test_empty_report() -> None:
    assert format_text(GradeReport("bob", [])) == "No exercises graded for bob."


def test_format_score() -> None:
    assert [format_score(v) for v in (6.0, 6.5, 6.25, 0.0, 1 / 3)] == ["6", "6.5", "6.25", "0", "0.33"]


def test_json_is_the_spec_document() -> None:
    doc = json.loads(format_json(sample_report()))
    assert doc == sample_report().to_json()
    assert set(doc) == {"student", "score", "max_score", "exercises"}
    assert doc["score"] == 18.0 and doc["max_score"] == 40.0
    bn = doc["exercises"][0]
    assert set(bn) == {"id", "status", "score", "max_score", "checks"}
    check = bn["checks"][1]
    assert set(check) == {"name", "passed", "score", "max_score", "message", "misconception"}
    assert check["misconception"] == "bn-biased-running-var" and check["passed"] is False


def test_gradescope_results(catalogue: None) -> None:
    doc = gradescope_results(sample_report())
    assert doc["score"] == 18.0
    assert doc["visibility"] == "visible" and doc["stdout_visibility"] in {"hidden", "visible"}
    assert doc["output"].startswith("normgrade report for alice")
    names = [t["name"] for t in doc["tests"]]
    assert names == ["normalization.BatchNorm1d", "activations.ReLU", "activations.GELU", "dropout.Dropout"]
    for test in doc["tests"]:
        assert set(test) >= {"name", "score", "max_score", "status", "output"}
        assert test["status"] in {"passed", "failed"}
    bn, relu = doc["tests"][0], doc["tests"][1]
    assert (bn["score"], bn["max_score"], bn["status"]) == (8.0, 10.0, "failed")
    assert bn["output"].index(SENTENCE) < bn["output"].index(DIFF)
    assert (relu["score"], relu["status"]) == (10.0, "passed")
    assert sum(t["score"] for t in doc["tests"]) == doc["score"]
    json.dumps(doc)  # serialisable


def test_write_json_and_error_document(tmp_path: Path) -> None:
    target = tmp_path / "results" / "results.json"
    write_json(gradescope_error("'BatchNorm' is not an exercise."), target)
    doc = json.loads(target.read_text())
    assert doc["score"] == 0.0 and doc["tests"] == []
    assert "'BatchNorm' is not an exercise." in doc["output"]
    assert [p.name for p in target.parent.iterdir()] == ["results.json"]


def test_a_shared_traceback_is_printed_once_and_a_failed_exercise_shows_its_output() -> None:
    crash = (
        "BatchNorm1d.forward raised ValueError: bad shape\n"
        '  File "normalization.py", line 12, in forward\n    mu = x.mean(axis=3)'
    )
    checks = [CheckResult(f"check_{i}", False, 0.0, 1.0, f"case {i}: {crash}") for i in range(13)]
    checks.append(
        CheckResult(
            "other", False, 0.0, 1.0, 'x raised KeyError: 1\n  File "normalization.py", line 40, in backward\n    c[1]'
        )
    )
    ex = ExerciseResult(
        "normalization.BatchNorm1d", "failed", 0.0, 14.0, checks, output="step 1\nstep 2\nmy debug print: var = 0.25\n"
    )
    text = format_text(GradeReport("ann", [ex]))
    assert text.count('File "normalization.py", line 12, in forward') == 1
    assert text.count("(the same traceback as above)") == 12
    assert text.count('File "normalization.py", line 40, in backward') == 1
    assert "What your code printed (last lines):" in text
    assert text.rstrip().splitlines()[-2].strip() == "my debug print: var = 0.25"
    assert "TODO" not in text and "FAILED" in text
    # a passed exercise shows nothing, not even what it printed
    ok = ExerciseResult("activations.ReLU", "passed", 10.0, 10.0, [], output="hello\n")
    assert "hello" not in format_text(GradeReport("ann", [ok]))


def test_one_word_per_status_in_the_text_the_json_and_the_readme() -> None:
    from pathlib import Path

    from grader.student.feedback.report import STATUS_LABELS

    readme = (Path(__file__).resolve().parents[3] / "docs" / "student.md").read_text(encoding="utf-8")
    for status, (label, _) in STATUS_LABELS.items():
        assert label == status.upper()
        assert f"`{status}`" in readme
    assert "TODO" not in {label for label, _ in STATUS_LABELS.values()}


def test_further_mistakes_travel_in_json_and_on_the_wire() -> None:
    """Round 3: CheckResult.also is in --json only when not empty, and survives the queue's wire form."""
    from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
    from grader.student.client.wire import report_from_dict, report_to_dict

    two = CheckResult(
        "running_var",
        False,
        0.0,
        0.75,
        "Known mistake a: ...\nAnd also: Known mistake b: ...",
        "bn-momentum-inverted",
        also=["bn-biased-running-var"],
    )
    one = CheckResult("forward", False, 0.0, 1.0, "Known mistake c: ...", "bn-eps-outside-sqrt")
    assert two.to_json()["also"] == ["bn-biased-running-var"] and "also" not in one.to_json()
    report = GradeReport("s", [ExerciseResult("normalization.BatchNorm1d", "failed", 0.0, 10.0, [two, one])])
    back = report_from_dict(report_to_dict(report))
    assert back.exercises[0].checks == [two, one]


# --- one cause, one box ------------------------------------------------------------------------------------

BUILD = (
    "kernels/activations.cl does not build; the compiler says:\n"
    "error: kernels/activations.cl:229:2: unknown type name 'this'\n  line 229: this is not C;"
)
KERNELS = [
    "kernels.relu_forward",
    "kernels.relu_backward",
    "kernels.gelu_forward",
    "kernels.gelu_backward",
    "kernels.dropout_forward",
    "kernels.rmsnorm_forward",
    "kernels.layernorm_forward",
]


def kernel_report() -> GradeReport:
    """Seven kernel exercises failing for one cause: the file does not build (in every check's message too)."""
    exercises = [
        ExerciseResult(
            k,
            "error",
            0.0,
            10.0,
            [CheckResult(name, False, 0.0, 2.5, BUILD) for name in ("values", "zeros", "small_n", "guard")],
            f"case 'main': {BUILD}",
            output="2 errors generated.\n",
        )
        for k in KERNELS
    ]
    crash = CheckResult("forward", False, 0.0, 10.0, "ReLU.forward raised ValueError: bad shape")
    return GradeReport("kim", exercises + [ExerciseResult("activations.ReLU", "failed", 0.0, 10.0, [crash])])


def test_one_cause_of_many_exercises_is_said_once_in_the_text() -> None:
    text = format_text(kernel_report())
    assert text.count("line 229: this is not C;") == 1  # the compiler log once, for 7 exercises and 28 checks
    assert (
        f"One cause behind 7 exercises ({', '.join(KERNELS)}, and their checks values, zeros, small_n, guard):" in text
    )
    pointer = "(the same cause as kernels.relu_forward above: kernels/activations.cl does not build)"
    assert text.count(pointer) == 6
    assert text.count("- values, zeros, small_n, guard (0/10): the same cause as above") == 7
    assert text.count("2 errors generated.") == 1 and text.count("the same as for kernels.relu_forward above") == 6
    assert "ReLU.forward raised ValueError: bad shape" in text  # another cause stays where it is
    # without the shared cause (a Gradescope test is one exercise) each exercise's output is complete
    from grader.student.feedback.report import exercise_details

    alone = "\n".join(exercise_details(kernel_report().exercises[3]))
    assert "line 229: this is not C;" in alone and "the same cause as kernels" not in alone


def test_one_cause_is_one_box_in_the_page() -> None:
    from grader.student.feedback.report_html import format_html

    page = format_html(kernel_report())
    assert page.count('class="ng-cause"') == 1 and page.count("line 229: this is not C;") == 1
    assert "<h3>7 exercises: kernels/activations.cl does not build</h3>" in page
    assert page.count('<a href="#cause-1">kernels/activations.cl does not build</a>') == 7
    assert page.count("Checks values, zeros, small_n, guard (0/10): the same cause.") == 7
    assert 'class="ng-check"' in page  # the ReLU crash keeps its own box
    assert page.count('class="ng-check"') == 1


def test_checks_failing_with_one_message_are_one_entry_and_different_messages_stay_apart() -> None:
    waiting = "not graded yet: this check counts once BatchNorm1d.forward is implemented"
    checks = [CheckResult(n, False, 0.0, 1.0, waiting) for n in ("numgrad", "no_mutation", "shape_dtype")]
    checks.append(CheckResult("forward", False, 0.0, 7.0, "y differs at 3"))
    ex = ExerciseResult("normalization.BatchNorm1d", "failed", 0.0, 10.0, checks)
    other = ExerciseResult(
        "normalization.LayerNorm", "failed", 0.0, 10.0, [CheckResult("forward", False, 0.0, 10.0, "y differs at 5")]
    )
    text = format_text(GradeReport("lee", [ex, other]))
    assert text.count(waiting) == 1 and "- numgrad, no_mutation, shape_dtype (0/3)" in text
    assert "y differs at 3" in text and "y differs at 5" in text and "One cause" not in text


def test_machine_faults_shared_by_exercises_are_said_once() -> None:
    reason = "no OpenCL device builds a kernel here: `grade doctor` shows what is missing"
    report = GradeReport("nia", [ExerciseResult(k, "not_graded", 0.0, 10.0, [], reason) for k in KERNELS[:3]])
    text = format_text(report)
    assert (
        text.count("One cause behind 3 exercises (kernels.relu_forward, kernels.relu_backward, kernels.gelu_forward):")
        == 1
    )
    assert text.count(f"(the same cause as kernels.relu_forward above: {reason})") == 2
    assert text.rstrip().splitlines()[-2].startswith("NOT_GRADED: 3 exercise(s)")
