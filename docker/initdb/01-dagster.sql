-- Dagster keeps its own storage in a separate database on the same server.
CREATE DATABASE dagster;
\c stash
CREATE EXTENSION IF NOT EXISTS vector;
