-- workers: 2
-- A table (in the migration's transaction: replaying it would fail) and an index on items,
-- built concurrently once that transaction has committed.
CREATE TABLE {s}.item_notes (item_id bigint PRIMARY KEY, note text);

-- concurrently
CREATE UNIQUE INDEX items_sku_idx
    ON {s}.items (sku);
