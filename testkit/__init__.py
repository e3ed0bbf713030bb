"""What the tests, the benchmarks, the docs' screenshots and the compose smoke share.

Part of the repository, not of the shipped wheel (pyproject's package list names only
``stash_pipeline`` and ``stash_serve``). It imports neither ``tests`` nor ``bench``, so
both can use it without importing each other (``tests/unit/test_tests_and_bench_apart.py``).

* ``testkit.openai_server``: a scripted OpenAI-compatible HTTP server (``ScriptedOpenAI``).
* ``testkit.scripted_model``: a deterministic model for it that answers every stage.
* ``testkit.database``: a real PostgreSQL + pgvector, one fresh database per test (pytest
  fixtures, registered for ``tests/`` and ``bench/tests/`` by the root ``conftest.py``).
* ``testkit.recall_sets``: a small labelled recall set and a short chat, written into a store.
* ``testkit.browser``: headless Chromium over the DevTools protocol (the browser tests, the
  console's paint bench).
"""
