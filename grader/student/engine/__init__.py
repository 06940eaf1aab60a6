"""The grading engine: catalogue, checks, the case interpreter (ops), comparison, diagnosis, case packs and
the pipeline (grading.grade). Ships in the handout; every grader (handout, instructor, server) runs it."""
