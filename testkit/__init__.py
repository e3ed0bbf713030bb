"""What the tests, the benchmarks, the docs' screenshots and the compose smoke share.

Part of the repository, not of the shipped wheel (pyproject's package list names only
``stash_pipeline`` and ``stash_serve``). It imports neither ``tests`` nor ``bench``, so
both can use it without importing each other.

* ``testkit.openai_server``: a scripted OpenAI-compatible HTTP server (``ScriptedOpenAI``).
* ``testkit.scripted_model``: a deterministic model for it that answers every stage.
"""
