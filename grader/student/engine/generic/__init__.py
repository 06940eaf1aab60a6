"""Generic diagnoses: what *kind* of wrong a result is, found from the reference's results (round 4).

The catalogue (``grader.mistakes``) names the mistakes somebody wrote down; this package names the
kinds of mistake nobody listed, from the data a check already has: the case's inputs, the
reference's results and the student's. Each family proposes a **claim** on the failing case (a
predicted result, or a statement about where the student differs), then checks it on **every**
case of the exercise: a claim is shown only when it holds on every case it touches (there it
reproduces the student, or its statement is true) and never predicts a difference where the
student has none (``claims.holds``). Families are tried in a fixed order, the most specific first
(``claims.ORDER``): those that run the reference first, then those that need nothing but data; the
first claim that holds is named, with the family's id (``generic-scale``) as the misconception and
its own words. A crash is named from its error alone (``claims.CRASH_ORDER``).

A generic diagnosis is combined with another difference the way round 3 combines known mistakes:
a claim may sit on top of a known mistake's variant (its results as the base instead of the
reference's), and then both are named (:class:`grader.student.engine.diagnosis.Combination`).

The modules, by concern (each one's docstring lists its families and what they find):

- ``claims``: the Context a family reads, the order and fixes of the families, ``GenericMistake``,
  ``Claim`` and the rule ``holds``, and what a case says about itself (settings, input, named constants);
- ``live_families``: the families that run the reference (param, mode, function, axes, terms; live only);
- ``data_families``: the families that need nothing but data (inplace, transpose, scale, offset, region);
- ``crash_families``: the families named from a crash's error (none, call, shape, key, validation);
- ``search``: ``find`` (the families tried in order on a failing check) and ``name_crashes``.

Import a name from the module that holds it; this file holds none.
"""
