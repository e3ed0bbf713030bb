-- placeholder --
-- Keeps the loader honest until real queries land.
SELECT 1
