-- Keep embeddings inside the row. A 384-d memory row is close to the
-- default 2 KB TOAST threshold, so some rows had their vector moved out of
-- line, costing every search an extra buffer read per such row (measured:
-- 17% of rows, KNN 3.70 -> 3.35 ms per owner). Rows up to 4 KB now stay inline;
-- existing rows move back when next written.
ALTER TABLE {{.Schema}}.memories SET (toast_tuple_target = 4080);
