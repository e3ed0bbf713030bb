"""The Stash MCP server: every memory operation as a tool.

``server.py`` builds the server (``build_server``) and maps every failure to a tool
error; ``calls.py`` runs one tool call (the caller's scope, a worker thread, errors as
results); ``params.py`` holds the argument types the tools share; ``derive.py`` makes each
tool from its operation, ``schemas.py`` writes its schemas for every converter, and
``toolsets.py`` chooses which tools a server offers.
Serving it over stdio or HTTP is ``stash_serve.serve``.
"""
