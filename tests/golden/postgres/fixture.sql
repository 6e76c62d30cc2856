-- Fixture for the Debezium golden records (tests/golden/postgres/record_debezium.py).
-- Run with psql, session time zone UTC, in two phases:
--
--   psql -v stream=false -f fixture.sql   drop and create the tables, insert the rows (ids 1..)
--                                         that the snapshot reads (op r)
--   psql -v stream=true  -f fixture.sql   once streaming runs: insert the same rows again with
--                                         ids 101.. (op c), then the updates, deletes and
--                                         logical-decoding messages at the end of this file
--
-- Each table holds one type family; every table has a row of NULLs (id 9x / 19x). Every
-- statement runs in its own transaction (psql autocommit). All tables keep REPLICA IDENTITY
-- DEFAULT (updates carry no "before", deletes only the key).
\set ON_ERROR_STOP on
SET TIME ZONE 'UTC';

\if :stream
\set b 100
\else
\set b 0
DROP TABLE IF EXISTS numerics, floats, ints, texts, dates, timestamps, timestamptzs, times, timetzs,
  intervals, arrays, moneys, byteas, uuids, jsons, bools, toasty;

-- numeric: unconstrained (VariableScaleDecimal in precise mode) and numeric(10,2) (Decimal scale 2)
CREATE TABLE numerics (id int PRIMARY KEY, n numeric, n102 numeric(10,2));
-- real / double precision
CREATE TABLE floats (id int PRIMARY KEY, r real, d double precision);
-- integers, with column defaults (Debezium puts them into the Connect schema)
CREATE TABLE ints (id int PRIMARY KEY, i2 smallint, i4 int, i8 bigint, dflt int DEFAULT 42,
  dtext text DEFAULT 'dflt');
-- character types
CREATE TABLE texts (id int PRIMARY KEY, c3 char(3), vc varchar(10), t text);
CREATE TABLE dates (id int PRIMARY KEY, d date);
CREATE TABLE timestamps (id int PRIMARY KEY, ts6 timestamp(6), ts3 timestamp(3), ts0 timestamp(0),
  ts timestamp);
CREATE TABLE timestamptzs (id int PRIMARY KEY, tz6 timestamptz(6), tz3 timestamptz(3),
  tz0 timestamptz(0), tz timestamptz);
CREATE TABLE times (id int PRIMARY KEY, t time, t6 time(6), t3 time(3), t0 time(0));
CREATE TABLE timetzs (id int PRIMARY KEY, tt timetz, tt3 timetz(3));
CREATE TABLE intervals (id int PRIMARY KEY, iv interval);
CREATE TABLE arrays (id int PRIMARY KEY, ia int4[], la int8[], ta text[], va varchar(5)[]);
CREATE TABLE moneys (id int PRIMARY KEY, m money);
CREATE TABLE byteas (id int PRIMARY KEY, b bytea);
CREATE TABLE uuids (id int PRIMARY KEY, u uuid);
CREATE TABLE jsons (id int PRIMARY KEY, j json, jb jsonb);
CREATE TABLE bools (id int PRIMARY KEY, b bool);
-- an out-of-line TOAST value (STORAGE EXTERNAL: no compression), for the update that leaves it
-- unchanged (Debezium writes its unavailable-value placeholder)
CREATE TABLE toasty (id int PRIMARY KEY, big text, n int);
ALTER TABLE toasty ALTER COLUMN big SET STORAGE EXTERNAL;
\endif

INSERT INTO numerics VALUES
  (:b+1, 'NaN', 'NaN'),
  (:b+2, 3.14159265358979323846264338327950288419716939937510, 3.14159265358979323846264338327950288419716939937510),
  (:b+3, 1.50, 1.50),
  (:b+4, 0, 0),
  (:b+5, -0.001, -0.001),
  (:b+6, 1e20, 99999999.99),
  (:b+7, 'Infinity', NULL),   -- numeric(10,2) cannot hold infinity
  (:b+8, '-Infinity', NULL),
  (:b+9, -123456789012345678901234567890.123456789, -12345678.9),
  (:b+99, NULL, NULL);

INSERT INTO floats VALUES
  (:b+1, 'NaN', 'NaN'),
  (:b+2, 'Infinity', 'Infinity'),
  (:b+3, '-Infinity', '-Infinity'),
  (:b+4, 1.5, 1.5),
  (:b+5, 0, 0),
  (:b+6, '-0', '-0'),
  (:b+7, 0.1, 0.1),
  (:b+8, 3.4028235e38, 1.7976931348623157e308),
  (:b+9, 1.4e-45, 4.9e-324),
  (:b+99, NULL, NULL);

INSERT INTO ints VALUES
  (:b+1, -32768, -2147483648, -9223372036854775808, 1, 'x'),
  (:b+2, 32767, 2147483647, 9223372036854775807, 0, ''),
  (:b+99, NULL, NULL, NULL, NULL, NULL);
INSERT INTO ints (id) VALUES (:b+3);   -- the defaults

INSERT INTO texts VALUES
  (:b+1, 'a', 'abc', 'plain'),
  (:b+2, '', '', ''),
  (:b+3, 'äö', 'ü€𝄞', E'tab\tnewline\nquote" backslash\\ nul-free'),
  (:b+99, NULL, NULL, NULL);

INSERT INTO dates VALUES
  (:b+1, 'infinity'),
  (:b+2, '-infinity'),
  (:b+3, '0044-03-15 BC'),
  (:b+4, '10000-01-01'),
  (:b+5, '1970-01-01'),
  (:b+6, '1969-12-31'),
  (:b+7, '2024-02-29'),
  (:b+8, '0001-01-01'),
  (:b+9, '0001-12-31 BC'),
  (:b+10, '4713-01-01 BC'),
  (:b+11, '5874897-12-31'),
  (:b+99, NULL);

INSERT INTO timestamps VALUES
  (:b+1, 'infinity', 'infinity', 'infinity', 'infinity'),
  (:b+2, '-infinity', '-infinity', '-infinity', '-infinity'),
  (:b+3, '0044-03-15 10:11:12.123456 BC', '0044-03-15 10:11:12.123456 BC', '0044-03-15 10:11:12.123456 BC', '0044-03-15 10:11:12.123456 BC'),
  (:b+4, '10000-01-01 00:00:00', '10000-01-01 00:00:00', '10000-01-01 00:00:00', '10000-01-01 00:00:00'),
  (:b+5, '12345-06-07 08:09:10.654321', '12345-06-07 08:09:10.654321', '12345-06-07 08:09:10.654321', '12345-06-07 08:09:10.654321'),
  (:b+6, '1970-01-01 00:00:00', '1970-01-01 00:00:00', '1970-01-01 00:00:00', '1970-01-01 00:00:00'),
  (:b+7, '2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.123456'),
  (:b+8, '1969-12-31 23:59:59.123456', '1969-12-31 23:59:59.123456', '1969-12-31 23:59:59.123456', '1969-12-31 23:59:59.123456'),
  (:b+9, '0001-01-01 00:00:00', '0001-01-01 00:00:00', '0001-01-01 00:00:00', '0001-01-01 00:00:00'),
  (:b+10, '294276-12-31 23:59:59', '294276-12-31 23:59:59', '294276-12-31 23:59:59', '294276-12-31 23:59:59'),
  (:b+11, '2000-01-01 00:00:00.5', '2000-01-01 00:00:00.5', '2000-01-01 00:00:00.5', '2000-01-01 00:00:00.5'),
  (:b+99, NULL, NULL, NULL, NULL);

INSERT INTO timestamptzs VALUES
  (:b+1, 'infinity', 'infinity', 'infinity', 'infinity'),
  (:b+2, '-infinity', '-infinity', '-infinity', '-infinity'),
  (:b+3, '0044-03-15 10:11:12.123456+00 BC', '0044-03-15 10:11:12.123456+00 BC', '0044-03-15 10:11:12.123456+00 BC', '0044-03-15 10:11:12.123456+00 BC'),
  (:b+4, '10000-01-01 00:00:00+00', '10000-01-01 00:00:00+00', '10000-01-01 00:00:00+00', '10000-01-01 00:00:00+00'),
  (:b+5, '12345-06-07 08:09:10.654321+00', '12345-06-07 08:09:10.654321+00', '12345-06-07 08:09:10.654321+00', '12345-06-07 08:09:10.654321+00'),
  (:b+6, '1970-01-01 00:00:00+00', '1970-01-01 00:00:00+00', '1970-01-01 00:00:00+00', '1970-01-01 00:00:00+00'),
  (:b+7, '2024-02-29 13:14:15.123456+05:30', '2024-02-29 13:14:15.123456+05:30', '2024-02-29 13:14:15.123456+05:30', '2024-02-29 13:14:15.123456+05:30'),
  (:b+8, '1969-12-31 23:59:59.123456+00', '1969-12-31 23:59:59.123456+00', '1969-12-31 23:59:59.123456+00', '1969-12-31 23:59:59.123456+00'),
  (:b+9, '0001-01-01 00:00:00+00', '0001-01-01 00:00:00+00', '0001-01-01 00:00:00+00', '0001-01-01 00:00:00+00'),
  (:b+10, '2000-01-01 00:00:00.5+00', '2000-01-01 00:00:00.5+00', '2000-01-01 00:00:00.5+00', '2000-01-01 00:00:00.5+00'),
  (:b+11, '294276-12-31 23:59:59+00', '294276-12-31 23:59:59+00', '294276-12-31 23:59:59+00', '294276-12-31 23:59:59+00'),
  (:b+99, NULL, NULL, NULL, NULL);

INSERT INTO times VALUES
  (:b+1, '24:00:00', '24:00:00', '24:00:00', '24:00:00'),
  (:b+2, '00:00:00', '00:00:00', '00:00:00', '00:00:00'),
  (:b+3, '13:14:15.123456', '13:14:15.123456', '13:14:15.123456', '13:14:15.123456'),
  (:b+4, '23:59:59.999999', '23:59:59.999999', '23:59:59.999999', '23:59:59.999999'),  -- time(3)/(0) round to 24:00:00
  (:b+5, '12:00:00.5', '12:00:00.5', '12:00:00.5', '12:00:00.5'),
  (:b+99, NULL, NULL, NULL, NULL);

INSERT INTO timetzs VALUES
  (:b+1, '24:00:00+00', '24:00:00+00'),
  (:b+2, '12:00:00+05:30', '12:00:00+05:30'),
  (:b+3, '00:00:00-08', '00:00:00-08'),
  (:b+4, '13:14:15.123456+00', '13:14:15.123456+00'),
  (:b+5, '23:59:59.999999-01:30', '23:59:59.999999-01:30'),
  (:b+6, '12:00:00.5+00', '12:00:00.5+00'),
  (:b+7, '10:00:00.12-02', '10:00:00.12-02'),
  (:b+99, NULL, NULL);

INSERT INTO intervals VALUES
  (:b+1, '1 year 2 mons 3 days 04:05:06.789012'),
  (:b+2, '-1 day'),
  (:b+3, '0'),
  (:b+4, '1 mon'),
  (:b+5, '-3 hours -4 minutes'),
  (:b+6, '00:00:00.000001'),
  (:b+7, '1 mon -1 day'),
  (:b+8, '100 years'),
  (:b+9, '-1 year -2 mons +3 days -04:05:06.5'),
  (:b+99, NULL);

INSERT INTO arrays VALUES
  (:b+1, '{}', '{}', '{}', '{}'),
  (:b+2, '{1,NULL,3}', '{1,NULL,3}', '{a,NULL,c}', '{a,NULL,c}'),
  (:b+3, '{1,2,3}', '{-9223372036854775808,9223372036854775807}', '{"with space","q\"uote","NULL",""}', '{"x y"}'),
  (:b+99, NULL, NULL, NULL, NULL);

INSERT INTO moneys VALUES
  (:b+1, '12.34'),
  (:b+2, '-0.01'),
  (:b+3, '0'),
  (:b+4, '92233720368547758.07'),
  (:b+5, '-92233720368547758.08'),
  (:b+6, '1234567.891'),   -- rounds to 1234567.89
  (:b+99, NULL);

INSERT INTO byteas VALUES
  (:b+1, '\x'),
  (:b+2, '\x00ff10'),
  (:b+3, 'hello'),
  (:b+99, NULL);

INSERT INTO uuids VALUES
  (:b+1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
  (:b+2, '00000000-0000-0000-0000-000000000000'),
  (:b+99, NULL);

INSERT INTO jsons VALUES
  (:b+1, '{"b": 1, "a": [1, 2, {"c": null}]}', '{"b": 1, "a": [1, 2, {"c": null}]}'),
  (:b+2, 'null', 'null'),         -- JSON null, not SQL NULL
  (:b+3, '"str"', '"str"'),
  (:b+4, '123.4500', '123.4500'),
  (:b+5, '[]', '[]'),
  (:b+6, '{ "dup": 1, "dup": 2 }', '{ "dup": 1, "dup": 2 }'),
  (:b+99, NULL, NULL);

INSERT INTO bools VALUES
  (:b+1, true),
  (:b+2, false),
  (:b+99, NULL);

INSERT INTO toasty VALUES
  (:b+1, repeat('x', 4000), 1),
  (:b+99, NULL, NULL);

\if :stream
-- one update, one delete (delete + tombstone)
UPDATE numerics SET n = 2.5, n102 = 2.5 WHERE id = 103;
DELETE FROM numerics WHERE id = 104;
-- delete of a row whose columns have defaults: "before" holds only the key
DELETE FROM ints WHERE id = 101;
-- an update that leaves the out-of-line TOAST value unchanged
UPDATE toasty SET n = 2 WHERE id = 101;
-- a primary-key change: delete + tombstone + create, with __debezium.oldkey/newkey headers
UPDATE bools SET id = 150 WHERE id = 101;
-- logical-decoding messages: transactional, then non-transactional
SELECT pg_logical_emit_message(true, 'pfx', 'hello');
SELECT pg_logical_emit_message(false, 'pfx', 'hello non-transactional');
-- the recorder stops at this one (not written to the fixtures)
SELECT pg_logical_emit_message(false, 'golden-end', '');
\endif
