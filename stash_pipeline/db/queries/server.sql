-- session_settings --
-- Settings every Stash connection runs with, whatever the server's defaults. JIT off:
-- PostgreSQL compiles a statement to machine code when its estimated cost passes
-- jit_above_cost, which recall's generic plan does on every run; compiling takes seconds
-- and no Stash statement runs long enough to win it back. Set per session (not per role
-- or database): it needs no privilege and changes nothing for the server's other clients.
SELECT set_config('jit', 'off', false) AS jit
