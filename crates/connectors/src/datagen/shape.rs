//! Row shapes. `users`, `pageviews` and `orders` follow Confluent's quickstarts (names
//! `ksql.users`, …); `bench` is a fixed-size row for measuring throughput, which names
//! the task that wrote it (`id` and `task` identify a row).

use sluice_api::{Schema, SchemaRef, Struct, Value};

pub struct Shape {
    pub key_schema: SchemaRef,
    pub value_schema: SchemaRef,
    kind: Kind,
    payload: String,
    task: i32,
}

enum Kind {
    Users,
    Pageviews,
    Orders,
    Bench,
}

const REGIONS: &[&str] = &["Region_1", "Region_2", "Region_3", "Region_4", "Region_5", "Region_6", "Region_7", "Region_8", "Region_9"];
const GENDERS: &[&str] = &["MALE", "FEMALE", "OTHER"];

impl Shape {
    /// The rows of task `task` (its `task.id`).
    pub fn new(name: &str, payload_bytes: usize, task: i32) -> Self {
        let s = |n: &str, sc: Schema| (n.to_owned(), sc.into_ref());
        let (kind, key, fields) = match name {
            "pageviews" => (
                Kind::Pageviews,
                Schema::int64(),
                vec![s("viewtime", Schema::int64()), s("userid", Schema::string()), s("pageid", Schema::string())],
            ),
            "orders" => (
                Kind::Orders,
                Schema::int32(),
                vec![
                    s("ordertime", Schema::int64()),
                    s("orderid", Schema::int32()),
                    s("itemid", Schema::string()),
                    s("orderunits", Schema::float64()),
                ],
            ),
            "bench" => (
                Kind::Bench,
                Schema::int64(),
                vec![s("id", Schema::int64()), s("task", Schema::int32()), s("ts", Schema::int64()), s("payload", Schema::string())],
            ),
            _ => (
                Kind::Users,
                Schema::string(),
                vec![
                    s("registertime", Schema::int64()),
                    s("userid", Schema::string()),
                    s("regionid", Schema::string()),
                    s("gender", Schema::string()),
                ],
            ),
        };
        let schema_name = match kind {
            Kind::Users => "ksql.users",
            Kind::Pageviews => "ksql.pageviews",
            Kind::Orders => "ksql.orders",
            Kind::Bench => "sluice.bench",
        };
        Self {
            key_schema: key.into_ref(),
            value_schema: Schema::struct_of(fields).named(schema_name).into_ref(),
            kind,
            payload: "x".repeat(payload_bytes),
            task,
        }
    }

    /// Row number `i` of a task, from the generator `rng`: `(key, value)`.
    pub fn row(&self, i: i64, now_ms: i64, rng: &mut fastrand::Rng) -> (Value, Value) {
        let schema = self.value_schema.clone();
        match self.kind {
            Kind::Users => {
                let user = format!("User_{}", rng.u32(1..10));
                let v = Struct::from_values(
                    schema,
                    vec![
                        Value::Int64(now_ms - rng.i64(0..1_000_000_000)),
                        Value::String(user.clone()),
                        Value::String(REGIONS[rng.usize(..REGIONS.len())].to_owned()),
                        Value::String(GENDERS[rng.usize(..GENDERS.len())].to_owned()),
                    ],
                );
                (Value::String(user), Value::Struct(v))
            }
            Kind::Pageviews => {
                let v = Struct::from_values(
                    schema,
                    vec![
                        Value::Int64(i + 1),
                        Value::String(format!("User_{}", rng.u32(1..10))),
                        Value::String(format!("Page_{}", rng.u32(1..100))),
                    ],
                );
                (Value::Int64(i + 1), Value::Struct(v))
            }
            Kind::Orders => {
                let id = (i + 1) as i32;
                let v = Struct::from_values(
                    schema,
                    vec![
                        Value::Int64(now_ms),
                        Value::Int32(id),
                        Value::String(format!("Item_{}", rng.u32(1..1000))),
                        Value::Float64(rng.f64() * 10.0),
                    ],
                );
                (Value::Int32(id), Value::Struct(v))
            }
            Kind::Bench => {
                let v = Struct::from_values(
                    schema,
                    vec![Value::Int64(i), Value::Int32(self.task), Value::Int64(now_ms), Value::String(self.payload.clone())],
                );
                (Value::Int64(i), Value::Struct(v))
            }
        }
    }
}
