-- PLACEHOLDER of branch wt-msgsrc: DELETE THIS FILE WHEN MERGING.
-- Version 11 belongs to another branch's migration (worked on in parallel);
-- the loader wants versions 1..n without gaps, so this stands in for it
-- until that migration is merged. It changes nothing.
SELECT 1;
