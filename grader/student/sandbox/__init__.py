"""The sandbox: ingesting a hand-in and running student code in bubblewrapped worker processes with limits
(runner, bwrap, worker). Ships in the handout; every grader uses it."""
