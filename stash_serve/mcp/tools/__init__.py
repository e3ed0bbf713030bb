"""The MCP tools, one module per subject, each beside ``stash_pipeline/memory/<subject>.py``.

Every module has one ``register(server, calls)`` that adds its tools to the server;
``stash_serve.mcp.server.build_server`` calls them in ``SUBJECTS`` order, which is the
order clients list the tools in.
"""
