"""Every refusal of the course server, answered in the kind the asker reads: JSON for the API, a page for a browser.

One rule, in one place (the application's handler of ``HTTPException``, installed by grader/server/web.py):
a request gets ``{"error": "<one line>"}`` when its path is under ``/api/`` or its ``Accept`` header asks for
JSON and not HTML (a script's ``fetch``); every other request (a page, a form sent from a page) gets a short
HTML page with the same line, a link back and the same status (4xx). So a dashboard or student form refused by
the text rule (grader/server/text_input.py), a body limit, a CSRF check or a rate limit never shows a browser
raw JSON. The dashboard's paths (``/instructor...``) get the dashboard's page and a link back to it; the others
the student's page and a link back to ``/student/``. Headers of the refusal (``Retry-After``) are kept.
"""

from __future__ import annotations

from http import HTTPStatus

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from grader.server import instructor, student_pages

DASHBOARD_PREFIX = "/instructor"


def wants_json(request: Request) -> bool:
    """Whether a refusal of ``request`` is answered in JSON: an API path, or an Accept naming JSON but not HTML."""
    if request.url.path.startswith("/api/"):
        return True
    accept = request.headers.get("accept", "").lower()
    return "application/json" in accept and "text/html" not in accept


def heading(status: int) -> str:
    """The page's heading: the status's standard phrase ("Bad Request", "Payload Too Large")."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Not possible"


async def http_error(request: Request, exc: Exception) -> Response:
    """An HTTPException as ``{"error": ...}`` (:func:`wants_json`) or as a short page with the line and a link back."""
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if wants_json(request):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=headers)
    if request.url.path.startswith(DASHBOARD_PREFIX):
        page = instructor.message(request, exc.status_code, heading(exc.status_code), str(exc.detail), error=True)
    else:
        page = student_pages.html_page(
            request,
            "student_message.html.j2",
            exc.status_code,
            None,
            title=heading(exc.status_code),
            heading=heading(exc.status_code),
            message=str(exc.detail),
            error=True,
            login=False,
            back="/student/",
        )
    page.headers.update(headers)
    return page
