-- Placeholder: version 8 belongs to the search branch (wt-search:
-- 0007_owner_vectors.sql, 0008_memory_access.sql); this file only keeps the
-- numbering without gaps on this branch and is deleted when the branches
-- are merged.
SELECT 1;
