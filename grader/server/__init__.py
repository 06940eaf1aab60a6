"""The course server (`grade serve`): see docs/design/server.md, "A submission's way through the server".

Needs the ``server`` extra (starlette, uvicorn, huey, redis).
"""
