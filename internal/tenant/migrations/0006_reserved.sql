-- Placeholder: version 6 belongs to the conversations migration of another
-- branch (0006_conversations.sql); this file only keeps the numbering without
-- gaps on this branch and is deleted when the two branches are merged.
SELECT 1;
