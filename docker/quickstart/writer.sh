#!/bin/bash
# Keeps changing the source table: a new order, a status change and now and then a delete,
# every second, until stopped.
set -u
until pg_isready -q; do sleep 1; done
until psql -qAtc 'SELECT 1 FROM orders LIMIT 1' >/dev/null 2>&1; do sleep 1; done
trap 'exit 0' TERM INT
i=0
while true; do
  i=$((i + 1))
  psql -q -v ON_ERROR_STOP=1 <<SQL >/dev/null || sleep 1
INSERT INTO orders (customer, amount) VALUES ('customer-$RANDOM', $((RANDOM % 500)).99);
UPDATE orders SET status = (ARRAY['paid','shipped','delivered'])[1 + $i % 3], updated_at = now()
  WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1);
$( [[ $((i % 5)) -eq 0 ]] && echo "DELETE FROM orders WHERE id = (SELECT min(id) FROM orders);" )
SQL
  sleep 1 & wait $!
done
