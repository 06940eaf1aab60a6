"""The course server's client: login, remote submit, quiz and progress, the upload rules and the wire form
of a report. Ships in the handout; the instructor's grade and the server use it too."""
