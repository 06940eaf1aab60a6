"""The instructor's term: batch grading, class reports, rescoring, similarity, regrades, extensions, exam
mode and their command line (`grade regrade/rescore/similarity`). Instructor only."""
