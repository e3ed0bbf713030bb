"""The Stash MCP server: every memory operation as a tool.

``server.py`` builds the server (``build_server``) and maps every failure to a tool
error; ``calls.py`` runs one tool call (the caller's scope, a worker thread, errors as
results); ``params.py`` holds the argument types the tools share; ``tools/<subject>.py``
registers the tools of one subject, beside ``stash_pipeline/memory/<subject>.py``.
Serving it over stdio or HTTP is ``stash_serve.serve``.
"""
