"""Quiz practice on the student's side: answer forms, SymPy numbers and formulas, how a question is posed,
the sealed practice files, what a session shows. Ships in the handout; grader.quiz builds on it."""
