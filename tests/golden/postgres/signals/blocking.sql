-- Fixture for the recording of Debezium's blocking snapshots (record_signals.py).
--   psql -v stream=false -f blocking.sql   the tables and the rows the initial snapshot reads
--   psql -v stream=true  -f blocking.sql   once streaming runs: changes around two
--                                          execute-snapshot signals of type blocking
\set ON_ERROR_STOP on
\if :stream
-- A blocking snapshot asked for inside a transaction, between two of its changes.
BEGIN;
INSERT INTO blk_a VALUES (10, 'ten');
INSERT INTO dbz_signal VALUES ('blk-1', 'execute-snapshot', '{"data-collections": ["public.blk_a"], "type": "blocking"}');
INSERT INTO blk_a VALUES (11, 'eleven');
COMMIT;
UPDATE blk_b SET v = 'B two (2)' WHERE id = 2;
INSERT INTO blk_b VALUES (12, 'twelve');
-- One table, filtered: for a blocking snapshot the filter is the whole SELECT statement.
INSERT INTO dbz_signal VALUES ('blk-2', 'execute-snapshot',
  '{"data-collections": ["public.blk_b"], "type": "BLOCKING", "additional-conditions": [{"data-collection": "public.blk_b", "filter": "SELECT * FROM public.blk_b WHERE id > 1"}]}');
-- Nothing is written to blk_a after the first signal or to blk_b after the second: what a
-- blocking snapshot reads of a table written after its signal depends on timing (it reads the
-- table as it is when it starts), in Debezium as in sluice.
SELECT pg_logical_emit_message(false, 'golden-end', '');
\else
DROP TABLE IF EXISTS blk_a, blk_b, dbz_signal;
CREATE TABLE blk_a (id int PRIMARY KEY, v text);
CREATE TABLE blk_b (id int PRIMARY KEY, v text);
CREATE TABLE dbz_signal (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));
INSERT INTO blk_a VALUES (1, 'one'), (2, 'two'), (3, 'three');
INSERT INTO blk_b VALUES (1, 'B one'), (2, 'B two'), (3, 'B three');
\endif
