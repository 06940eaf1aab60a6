"""The course repository's side: everything that needs reference/ (live grading, live checks, kernel
emulation, the solution, scaffolding, packs, release, Gradescope). Instructor only: never in a handout."""
