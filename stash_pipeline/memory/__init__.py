"""Memory operations: plain functions taking a ``Store`` first.

One module per group, so any operation is one hop away:

    namespaces      create (mkdir -p), list, show, delete, init /self
    episodes        remember (one/batch), get, forget (threshold + preview), purge, import
    recall          hybrid vector + full-text search over current facts and episodes
    context         set / get / clear one focus per namespace (TTL enforced)
    facts           query, get, assert, withdraw, purge, withdrawal cascade, lineage
    graph           relationships, patterns, causal links (create/list/trace/delete)
    contradictions  list, resolve with an action on the facts
    hypotheses      create, list, show, test, refine, confirm, reject, delete, evidence
    goals           create, list, show, update, complete, abandon, delete, notes
    failures        create, list, show, delete
    interchange     import episode files, export and restore a namespace tree
    admin           stats

and the helpers they share: ``validate`` (input checks), ``scope`` (which namespaces a
read or a by-id operation may touch), ``paging`` (the paged list shape) and ``lineage``
(where derived rows came from; the withdrawal cascade).
"""
