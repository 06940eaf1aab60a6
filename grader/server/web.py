"""The whole web application of the course server: the JSON API (grader/server/app.py) with the pages built
on it (the dashboard, grader/server/pages.py; the student's pages, grader/server/student_pages.py) and the
LTI routes, their lifespan (the collector and the LMS score poster) and security headers.

``create_app(config)`` builds it; ``grade serve`` runs it with uvicorn. It
sits above the API and the pages: the student's pages are built on the API's
helpers, so the API cannot import them to mount them; this module puts them
side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route

from grader import quiz as quiz_lib
from grader.quiz import judging
from grader.server import app as api
from grader.server import lti, lti_services, openapi, pages, practice_api, practice_pages, student_pages
from grader.server.app import API_PREFIX, ServerConfig, ServerState, grader_version, server_error
from grader.server.errors import http_error
from grader.queue.collector import Collector
from grader.server.headers import Framing, SecurityHeaders
from grader.queue.jobs import open_queue
from grader.queue.selftest import SelfTest
from grader.student import store as store_lib
from grader.student.engine import scaffolding
from grader.term import standing
from grader.student.store import Store


# Every JSON endpoint of the API, with who may call it: the course server's (grader/server/app.py) and the
# practice loop's (grader/server/practice_api.py). Mounted, listed by GET /api/v1/ and described by the OpenAPI
# document from this one table.
API_TABLE = api.API + practice_api.API


def routes(with_lti: bool = True) -> list[BaseRoute]:
    """The API routes, then the pages (grader/server/pages.py), the student's pages, the dashboard's LMS page and,
    ``with_lti`` (the course has an ``[lti]`` section), the LTI routes ``/lti/...``."""
    endpoints: list[BaseRoute] = [
        Route(API_PREFIX + "/", api.api_index, methods=["GET"]),
        Route(API_PREFIX + openapi.OPENAPI_PATH, openapi.openapi_json, methods=["GET"]),
    ]
    endpoints += [Route(API_PREFIX + path, handler, methods=[method]) for method, path, handler, _ in API_TABLE]
    launch = lti.routes() if with_lti else []
    return (
        endpoints + pages.routes() + practice_pages.routes() + student_pages.routes() + launch + lti_services.routes()
    )


def create_app(config: ServerConfig, run_collector: bool = True) -> Starlette:
    """The application; it claims the database (StoreError when another process serves it or the file is
    corrupt), and the collector and the score poster start with it."""
    Store.open(config.db_path).close()  # refuses a corrupt or foreign file before anything is served
    serving = store_lib.serve(config.db_path, config.url)  # from here on this process alone writes the file
    try:
        app = _build(config, run_collector, serving)
    except BaseException:
        serving.release()
        raise
    return app


def _build(config: ServerConfig, run_collector: bool, serving: store_lib.Serving) -> Starlette:
    """The application on a claimed database (``serving``)."""
    quiz_dir = config.quiz_dir if config.quiz_dir is not None else quiz_lib.default_quiz_dir()
    quizzes = quiz_lib.load_all(quiz_dir) if quiz_dir.is_dir() else []
    st = ServerState(config, quizzes, grader_version=grader_version())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        poster = None
        try:
            st.store = store = Store.open(config.db_path)  # this thread's connection: the handlers run here
            try:
                if quizzes:
                    await asyncio.to_thread(judging.warm_up)  # quiz judges fork from a process with SymPy loaded
                loop = asyncio.get_running_loop()
                if run_collector:

                    def closed(job_id: int) -> None:  # (from the collector's thread: st.wake runs on the loop)
                        loop.call_soon_threadsafe(st.wake, job_id)

                    st.collector = Collector(
                        config.db_path,
                        config.queue_url,
                        st.grader_version,
                        config.job_timeout,
                        config.collect_interval,
                        on_closed=closed,
                        lease_timeout=config.lease_timeout,
                        selftest=SelfTest(open_queue(config.queue_url), config.selftest_retry),
                        practice_view=lambda report, at: standing.student_report(report, config.course, at),
                    )  # exam mode: held, not scheduled
                    st.collector.start()
                poster = lti_services.start_poster(app)  # beside the collector, when [lti] names platforms
                with scaffolding.levels_in_force(standing.scaffolding_levels(config.course)):  # as the handout's
                    yield
            finally:
                if poster is not None:
                    poster.stop()
                    poster.join(timeout=10)
                if st.collector is not None:
                    st.collector.stop()
                    st.collector.join(timeout=10)
                store.close()
        finally:
            serving.release()

    framing = Framing(lti.platforms_of(config.course).frame_origins(), lti.FRAMED_PATHS)  # who may frame the launch
    app = Starlette(
        routes=routes(bool(config.course.lti)),
        lifespan=lifespan,
        middleware=[Middleware(SecurityHeaders, framing=framing)],
        exception_handlers={HTTPException: http_error, Exception: server_error},
    )
    app.state.normgrade = st
    app.state.api_table = API_TABLE
    lti_services.install(app)  # LTI 1.3: its settings, tables and key (the poster starts with the lifespan)
    return app
