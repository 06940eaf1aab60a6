"""Generic diagnoses: what *kind* of wrong a result is, found from the reference's results (round 4).

The catalogue (``grader.mistakes``) names the mistakes somebody wrote down; this module names the
kinds of mistake nobody listed, from the data a check already has: the case's inputs, the
reference's results and the student's. Each family proposes a **claim** on the failing case (a
predicted result, or a statement about where the student differs), then checks it on **every**
case of the exercise: a claim is shown only when it holds on every case it touches (there it
reproduces the student, or its statement is true) and never predicts a difference where the
student has none (:func:`holds`). Families are tried in a fixed order, the most specific first
(:data:`ORDER`); the first claim that holds is named, with the family's id (``generic-scale``) as
the misconception and its own words.

Families that need nothing but data (they run offline on a case pack too), in the order tried
after the live ones below:

- ``generic-transpose``: an output is the expected one with its axes reversed;
- ``generic-scale``: an output is c times the expected one (c the same in every case, or the same
  known expression of each case's sizes and settings: 2, 1/2, 1/(1-p), p, m/(m-1), D, 1/D, ...);
- ``generic-offset``: an output is the expected one plus c;
- ``generic-region``: an output right everywhere but one place, in every case: for an activation,
  one side of x = 0 (or x = 0 itself); for any output, its last (or first) row or column (a loop
  one short, a tail skipped); or every case but those with one setting (``approximate='tanh'``,
  eval mode);
- ``generic-inplace`` (tried first): an array handed to the student (x, dout) was written into.

Named from a crash's error alone (:data:`CRASH_ORDER`, also for checks that never diagnose, through
:func:`name_crashes`): ``generic-none`` (a value left None: an unset variable, a missing return),
``generic-call`` (an argument missing or misplaced), ``generic-shape`` (operands whose shapes do not
fit), ``generic-key`` (a value read back under another key), ``generic-validation`` (the student's
own check rejecting a valid input).

Families that run the reference (live only: ``Expected.rerun`` runs the reference on a rewritten
script, ``Expected.terms`` and ``Expected.axis_variant`` compute the reference's formulas; a case
pack has no reference code and skips them), tried first in this order:

- ``generic-param``: the result is the reference's with one setting changed (a default eps of
  1.00001, momentum read as 1 - momentum, negative_slope ignored, bias=False by default);
- ``generic-mode``: training and eval swapped, or the state updated twice per forward;
- ``generic-function``: an activation's derivative taken at the output instead of the input, or
  another activation's derivative;
- ``generic-axes``: a normalisation's statistics (both, the mean or the variance alone), its
  parameter gradients' sums or its backward's means taken over other axes, by a rule that carries
  over to every input shape ("every axis", "axis 0 only", "the last axis only", ...);
- ``generic-terms``: the reference's backward written as a sum of named terms: the coefficients
  (least squares, checked exactly) that reproduce the student, a term missing, doubled, halved,
  with the wrong sign or another factor; or one term wrong by a factor that changes from one
  normalised group to the next while the others are right.

A generic diagnosis is combined with another difference the way round 3 combines known mistakes:
a claim may sit on top of a known mistake's variant (its results as the base instead of the
reference's), and then both are named (:class:`grader.student.engine.diagnosis.Combination`).

The package, by concern: ``claims`` (the Context a family reads, :data:`ORDER`, the fixes, :class:`Claim` and
:func:`holds`, what a case says about itself), ``data_families``, ``crash_families``, ``live_families`` (one
function per family proposing claims) and ``search`` (``find`` and ``name_crashes``: the families tried in
order). Import from the module that holds a name; this file holds none.
"""
