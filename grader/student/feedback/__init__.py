"""Feedback: the text, JSON and HTML reports, the figures of failing checks and their SVG drawing, the
progress summary and the notebook front end. Ships in the handout; the instructor's side uses it too."""
