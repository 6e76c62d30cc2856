-- The source table the quick start captures (run once when the source database is created).
CREATE TABLE orders (
  id serial PRIMARY KEY,
  customer text NOT NULL,
  amount numeric(10, 2) NOT NULL,
  status text NOT NULL DEFAULT 'new',
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO orders (customer, amount) SELECT 'customer-' || g, g * 1.25 FROM generate_series(1, 20) g;
