"""The LTI services in the server: installed on the app (the poster thread, a roster sync off the event loop),
and the dashboard's LMS page."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timezone
from typing import Any

from grader.server import instructor, limits, lti
from grader.server.lti_services.ags import (
    ScorePoster,
    ags_mode,
    pending_scores,
    refused_scores,
    score_counts,
    send_refused_again,
)
from grader.server.lti_services.connector import contexts
from grader.server.lti_services.nrps import SyncResult, sync_roster
from grader.student.store import Store, lti_courses, lti_launches

LOG = logging.getLogger("normgrade.lti")


# --- the application's side ---------------------------------------------------------------------------


def install(app: Any) -> None:
    """Give the application its LTI settings and signing key (called by create_app; the store made the tables)."""
    st = app.state.normgrade
    app.state.lti_config = lti.platforms_of(st.config.course)
    app.state.lti_jwks = lti.JwksCache()
    app.state.lti_logins = limits.PerClient(lti.LOGINS_PER_CLIENT, lti.LOGIN_WINDOW_S)
    with Store.open(st.config.db_path) as store:
        lti.signing_key(store)


def start_poster(app: Any) -> ScorePoster | None:
    """Start the score poster when [lti] names platforms (the lifespan stops it); None otherwise."""
    st = app.state.normgrade
    if not app.state.lti_config.platforms or not getattr(app.state, "lti_poster_enabled", True):
        app.state.lti_poster = None
        return None
    poster = ScorePoster(st.config.db_path, st.config.queue_url, st.config.course, st.quizzes)
    poster.start()
    app.state.lti_poster = poster
    return poster


async def sync_in_thread(app: Any) -> SyncResult:
    """The roster sync on a connection of its own in a worker thread (the LMS may be slow: the loop goes on)."""
    st = app.state.normgrade

    def run() -> SyncResult:
        with Store.open(st.config.db_path) as store:
            return sync_roster(store, app.state.lti_config)

    result = await asyncio.to_thread(run)
    LOG.warning("roster sync: %s", result.summary())
    return result


# --- the dashboard's LMS page -------------------------------------------------------------------------


def dashboard_context(store: Store, config: lti.LtiConfig) -> dict[str, Any]:
    """What /instructor/lti shows: platforms, bound courses, members, waiting and refused scores, keys, refusals."""
    members = lti_courses.learner_members(store.db)
    bindings = []
    for platform in config.platforms:
        rows = {r["context_id"]: r for r in lti_courses.bindings(store.db, platform.issuer, platform.client_id)}
        for context_id, title in lti.bound_contexts(store, platform).items():
            row = rows.get(context_id, {})
            how = (
                "listed in course.toml"
                if platform.contexts
                else f"bound by the first instructor launch, {row.get('bound_at', '')}"
            )
            bindings.append(
                {
                    "platform": platform.name,
                    "context_id": context_id,
                    "title": title
                    or next(
                        (
                            c["title"]
                            for c in contexts(store)
                            if c["context_id"] == context_id and c["issuer"] == platform.issuer
                        ),
                        "",
                    ),
                    "how": how,
                }
            )
    now = time.time()
    keys = [
        {
            **k,
            "next": k["signs_from"] > now,
            "starts": datetime.fromtimestamp(k["signs_from"], timezone.utc).isoformat(timespec="seconds"),
        }
        for k in lti.published_keys(store)
    ]
    return {
        "platforms": config.platforms,
        "contexts": contexts(store, config),
        "bindings": bindings,
        "members": members,
        "pending": pending_scores(store, 100),
        "refused": refused_scores(store, 100),
        "counts": score_counts(store),
        "refusals": lti_launches.recent_refusals(store.db, 20),
        "signing_keys": keys,
        "signing": lti.signing_key(store).kid,
        "modes": {c["key"]: ags_mode(c) for c in contexts(store, config)},
    }


async def dashboard_page(request: Any, mode: str, notice: str = "", error: bool = False) -> Any:
    """GET /instructor/lti: the LMS connection: roster sync, scores waiting for the LMS, refused launches."""
    store = instructor.store_of(request)
    return instructor.page(
        request,
        "LMS (LTI 1.3)",
        page="lti",
        notice=notice,
        notice_error=error,
        lti_view=dashboard_context(store, request.app.state.lti_config),
    )


async def dashboard_sync(request: Any, mode: str) -> Any:
    """POST /instructor/lti/sync: pull the LMS's membership into the roster now (the roster sync)."""
    instructor.check_csrf(request, await instructor.read_form(request), mode)
    result = await sync_in_thread(request.app)
    return await dashboard_page(
        request,
        mode,
        "Roster sync: "
        + result.summary()
        + (". New students get their token by launching from the LMS." if result.new_students else ""),
        bool(result.errors),
    )


async def dashboard_rotate(request: Any, mode: str) -> Any:
    """POST /instructor/lti/rotate-key: publish a next signing key (it signs once platforms' copies expired)."""
    instructor.check_csrf(request, await instructor.read_form(request), mode)
    try:
        kid = lti.rotate_key(instructor.store_of(request))
    except lti.RotationWaiting as exc:
        return await dashboard_page(request, mode, f"Not rotated: {exc}", True)
    LOG.warning("LTI signing key rotated: %s is published and signs in %d s", kid, lti.JWKS_MAX_AGE_S)
    return await dashboard_page(
        request,
        mode,
        f"New signing key {kid} published; it signs from "
        f"{lti.JWKS_MAX_AGE_S // 60} minutes from now (platforms' copies of the key set "
        "have expired by then); the current key signs until then and stays published.",
    )


async def dashboard_retry(request: Any, mode: str) -> Any:
    """POST /instructor/lti/retry: send the scores the LMS refused again (after fixing the cause in the LMS)."""
    instructor.check_csrf(request, await instructor.read_form(request), mode)
    count = send_refused_again(instructor.store_of(request))
    poster = getattr(request.app.state, "lti_poster", None)
    if poster is not None:
        poster.wake.set()
    return await dashboard_page(request, mode, f"{count} refused score(s) will be sent again.")


def routes() -> list[Any]:
    """The dashboard's LMS page and its buttons (behind the dashboard's login)."""
    from starlette.routing import Route

    return [
        Route("/instructor/lti", instructor.guarded(dashboard_page), methods=["GET"]),
        Route("/instructor/lti/sync", instructor.guarded(dashboard_sync), methods=["POST"]),
        Route("/instructor/lti/rotate-key", instructor.guarded(dashboard_rotate), methods=["POST"]),
        Route("/instructor/lti/retry", instructor.guarded(dashboard_retry), methods=["POST"]),
    ]
