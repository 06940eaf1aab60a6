"""The course server (`grade serve`): see docs/design.md, "A submission's way through the server".

Needs the ``server`` extra (starlette, uvicorn, huey, redis).
"""
