"""LTI Advantage services: the service token, NRPS (the roster) and AGS (line items and scores).

One module per concern: ``connector`` (the service token, reading a container page by page, the errors), ``nrps``
(the roster sync), ``ags`` (line items, the score outbox and its poster thread) and ``lms_page`` (installed on the
app, and the dashboard's LMS page). The tables are the store's (grader/student/store/lti_courses.py,
lti_scores.py).
"""

from __future__ import annotations

from grader.server.lti_services.ags import (
    Column,
    ScorePoster,
    ags_mode,
    columns,
    ensure_line_item,
    fingerprint,
    now_iso,
    pending_scores,
    posted_columns,
    refused_scores,
    scan,
    scopes_of,
    score_counts,
    score_payload,
    score_task_id,
    scores_url,
    send_refused_again,
    token_scopes,
    total_column,
)
from grader.server.lti_services.connector import (
    HTTP_TIMEOUT_S,
    LINEITEM_TYPE,
    LINEITEMS_TYPE,
    MAX_BACKOFF_S,
    MAX_PAGES,
    MEMBERSHIP_TYPE,
    SCOPE_LINEITEM,
    SCOPE_LINEITEM_READONLY,
    SCOPE_NRPS,
    SCOPE_SCORE,
    SCORE_TYPE,
    TOTAL,
    ServiceConnector,
    ServiceError,
    contexts,
    is_final,
    paged,
)
from grader.server.lti_services.lms_page import (
    dashboard_context,
    dashboard_page,
    install,
    routes,
    start_poster,
    sync_in_thread,
)
from grader.server.lti_services.nrps import SyncResult, dropped_students, membership, sync_roster

__all__ = [
    "HTTP_TIMEOUT_S", "LINEITEMS_TYPE", "LINEITEM_TYPE", "MAX_BACKOFF_S", "MAX_PAGES", "MEMBERSHIP_TYPE",
    "SCOPE_LINEITEM", "SCOPE_LINEITEM_READONLY", "SCOPE_NRPS", "SCOPE_SCORE", "SCORE_TYPE", "TOTAL", "Column",
    "ScorePoster", "ServiceConnector", "ServiceError", "SyncResult", "ags_mode", "columns", "contexts",
    "dashboard_context", "dashboard_page", "dropped_students", "ensure_line_item", "fingerprint", "install",
    "is_final", "membership", "now_iso", "paged", "pending_scores", "posted_columns", "refused_scores", "routes",
    "scan", "score_counts", "score_payload", "score_task_id", "scopes_of", "scores_url", "send_refused_again",
    "start_poster", "sync_in_thread", "sync_roster", "token_scopes", "total_column",
]
