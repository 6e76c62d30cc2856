//! Debezium's ExtractNewRecordState and outbox EventRouter.

use sluice_api::{Schema, SchemaRef, Value};

use super::*;

const UNWRAP: &str = "io.debezium.transforms.ExtractNewRecordState";
const ROUTER: &str = "io.debezium.transforms.outbox.EventRouter";

struct Envelope {
    row: SchemaRef,
    source: SchemaRef,
    tx: SchemaRef,
    schema: SchemaRef,
}

/// The envelope shape of ExtractNewRecordStateTest: row {id:int8, name:string?}, source with
/// lsn, transaction {id, total_order, data_collection_order}.
fn envelope() -> Envelope {
    let row = Schema::struct_of([("id", Schema::int8().into_ref()), ("name", Schema::string().optional().into_ref())])
        .named("dummy.Value")
        .optional()
        .into_ref();
    let source = Schema::struct_of([
        ("lsn", Schema::int32().into_ref()),
        ("ts_ms", Schema::int64().optional().into_ref()),
        ("table", Schema::string().optional().into_ref()),
    ])
    .named("source")
    .into_ref();
    let tx = Schema::struct_of([
        ("id", Schema::string().into_ref()),
        ("total_order", Schema::int64().into_ref()),
        ("data_collection_order", Schema::int64().into_ref()),
    ])
    .optional()
    .into_ref();
    let schema = Schema::struct_of([
        ("before", row.clone()),
        ("after", row.clone()),
        ("source", source.clone()),
        ("op", Schema::string().into_ref()),
        ("ts_ms", Schema::int64().optional().into_ref()),
        ("transaction", tx.clone()),
    ])
    .named("dummy.Envelope")
    .into_ref();
    Envelope { row, source, tx, schema }
}

impl Envelope {
    fn row(&self, id: i8, name: &str) -> Value {
        st(&self.row, vec![Value::Int8(id), s(name)])
    }

    fn event(&self, op: &str, before: Value, after: Value, tx: bool) -> TransformRecord {
        let source = st(&self.source, vec![Value::Int32(1234), Value::Int64(1_694_587_158_123), s("orders")]);
        let tx = if tx { st(&self.tx, vec![s("571"), Value::Int64(42), Value::Int64(42)]) } else { Value::Null };
        let value = st(&self.schema, vec![before, after, source, s(op), Value::Int64(1_700_000_000_000), tx]);
        let mut r = keyed(Some(Schema::int8()), Value::Int8(1), Some((*self.schema).clone()), value);
        r.value_schema = Some(self.schema.clone());
        r
    }

    fn create(&self) -> TransformRecord {
        self.event("c", Value::Null, self.row(1, "myRecord"), false)
    }

    fn update(&self) -> TransformRecord {
        self.event("u", self.row(1, "old"), self.row(1, "new"), true)
    }

    fn delete(&self) -> TransformRecord {
        self.event("d", self.row(1, "myRecord"), Value::Null, false)
    }

    fn tombstone(&self) -> TransformRecord {
        keyed(Some(Schema::int8()), Value::Int8(1), None, Value::Null)
    }
}

// ExtractNewRecordStateTest.testTombstoneDroppedByDefault / testDeleteForwardConfigured /
// testHandleCreateRewrite / testUnwrapCreateRecord; event-flattening.adoc's table of modes.
#[test]
fn transform_unwrap_default_mode_is_tombstone() {
    let e = envelope();
    let t = make(UNWRAP, &[]);
    assert_eq!(value_of(&apply(&*t, e.create())), r#"struct<dummy.Value>{id:int8,name:string?}? | {id=1i8,name="myRecord"}"#);
    let out = apply(&*t, e.delete());
    assert_eq!((key_of(&out), value_of(&out)), ("int8 | 1i8".to_owned(), "struct<dummy.Value>{id:int8,name:string?}? | null".to_owned()));
    assert!(try_apply(&*t, e.tombstone()).unwrap().is_none());
    // Records that are not change events pass through (testIgnoreUnknownRecord).
    let other = record(Some(Schema::string().named("heartbeat")), s("x"));
    assert_eq!(apply(&*t, other.clone()), other);
    let unnamed = record(Some(Schema::int32()), Value::Int32(1));
    assert_eq!(apply(&*t, unnamed.clone()), unnamed);
    // A truncate (no before, no after) is dropped.
    assert!(try_apply(&*t, e.event("t", Value::Null, Value::Null, false)).unwrap().is_none());
}

// event-flattening.adoc: drop, rewrite, rewrite-with-tombstone, delete-to-tombstone.
#[test]
fn transform_unwrap_delete_tombstone_handling_modes() {
    let e = envelope();
    let mode = |m: &str| make(UNWRAP, &[("delete.tombstone.handling.mode", m)]);

    let drop = mode("drop");
    assert!(try_apply(&*drop, e.delete()).unwrap().is_none());
    assert!(try_apply(&*drop, e.tombstone()).unwrap().is_none());

    // testHandleDeleteRewrite / testHandleCreateRewrite: __deleted "true" / "false".
    let rewrite = mode("rewrite");
    assert_eq!(
        value_of(&apply(&*rewrite, e.delete())),
        r#"struct<dummy.Value>{id:int8,name:string?,__deleted:string?} | {id=1i8,name="myRecord",__deleted="true"}"#
    );
    assert_eq!(
        value_of(&apply(&*rewrite, e.create())),
        r#"struct<dummy.Value>{id:int8,name:string?,__deleted:string?} | {id=1i8,name="myRecord",__deleted="false"}"#
    );
    assert!(try_apply(&*rewrite, e.tombstone()).unwrap().is_none());

    // testTombstoneForwardConfigured.
    let rwt = mode("rewrite-with-tombstone");
    let tomb = e.tombstone();
    assert_eq!(apply(&*rwt, tomb.clone()), tomb);
    assert!(value_of(&apply(&*rwt, e.delete())).ends_with(r#"__deleted="true"}"#));

    let dtt = mode("delete-to-tombstone");
    let out = apply(&*dtt, e.delete());
    assert_eq!((key_of(&out), value_of(&out)), ("int8 | 1i8".to_owned(), "- | null".to_owned()));
    assert!(try_apply(&*dtt, e.tombstone()).unwrap().is_none());

    assert!(config_error(UNWRAP, &[("delete.tombstone.handling.mode", "keep")]).contains("delete.tombstone.handling.mode"));
}

// The deprecated keys, as LegacyDeleteHandlingStrategy (removed in Debezium 3.x): deletes
// dropped by default, `none` keeps a null-valued record, tombstones kept with drop.tombstones=false.
#[test]
fn transform_unwrap_legacy_delete_keys() {
    let e = envelope();
    let t = make(UNWRAP, &[("drop.tombstones", "false")]);
    assert!(try_apply(&*t, e.delete()).unwrap().is_none());
    assert_eq!(apply(&*t, e.tombstone()), e.tombstone());
    let t = make(UNWRAP, &[("delete.handling.mode", "none")]);
    assert_eq!(value_of(&apply(&*t, e.delete())), "struct<dummy.Value>{id:int8,name:string?}? | null");
    assert!(try_apply(&*t, e.tombstone()).unwrap().is_none());
    let t = make(UNWRAP, &[("delete.handling.mode", "rewrite")]);
    assert!(value_of(&apply(&*t, e.delete())).ends_with(r#"__deleted="true"}"#));
    // The new key wins over the old ones.
    let t = make(UNWRAP, &[("delete.handling.mode", "rewrite"), ("delete.tombstone.handling.mode", "drop")]);
    assert!(try_apply(&*t, e.delete()).unwrap().is_none());
}

// ExtractNewRecordStateTest.testAddFields / testAddFieldsSpecifyStruct / testAddFieldsMapping /
// testAddHeader*: `lsn` is read from source, `id` from transaction, renames with `:`.
#[test]
fn transform_unwrap_add_fields_and_headers() {
    let e = envelope();
    let t = make(UNWRAP, &[("add.fields", "op , lsn,id"), ("add.fields.prefix", "prefix.")]);
    assert_eq!(
        value_of(&apply(&*t, e.update())),
        r#"struct<dummy.Value>{id:int8,name:string?,prefix.op:string?,prefix.lsn:int32?,prefix.id:string?} | {id=1i8,name="new",prefix.op="u",prefix.lsn=1234i32,prefix.id="571"}"#
    );
    let t = make(UNWRAP, &[("add.fields", "op:OP,source.lsn:source_lsn,transaction.total_order:TOTAL_ORDER,source.ts_ms,ts_ms,table")]);
    assert_eq!(
        value_of(&apply(&*t, e.update())),
        r#"struct<dummy.Value>{id:int8,name:string?,__OP:string?,__source_lsn:int32?,__TOTAL_ORDER:int64?,__source_ts_ms:int64?,__ts_ms:int64?,__table:string?} | {id=1i8,name="new",__OP="u",__source_lsn=1234i32,__TOTAL_ORDER=42i64,__source_ts_ms=1694587158123i64,__ts_ms=1700000000000i64,__table="orders"}"#
    );
    // Without a transaction the transaction fields are null.
    let t = make(UNWRAP, &[("add.fields", "op,id")]);
    assert_eq!(
        value_of(&apply(&*t, e.create())),
        r#"struct<dummy.Value>{id:int8,name:string?,__op:string?,__id:string?} | {id=1i8,name="myRecord",__op="c",__id=null}"#
    );
    // Fields are added to a rewritten delete, not to a delete turned into a null value.
    let t = make(UNWRAP, &[("add.fields", "op"), ("delete.tombstone.handling.mode", "rewrite")]);
    assert!(value_of(&apply(&*t, e.delete())).ends_with(r#"__deleted="true",__op="d"}"#));
    // Headers; a tombstone gets `__op: d` (makeHeaders on a null value).
    let t = make(UNWRAP, &[("add.headers", "op,source.lsn"), ("delete.tombstone.handling.mode", "rewrite-with-tombstone")]);
    assert_eq!(headers_of(&apply(&*t, e.create()).headers), r#"__op:string?="c" __source_lsn:int32?=1234i32"#);
    assert_eq!(headers_of(&apply(&*t, e.tombstone()).headers), r#"__op:string="d""#);
}

// ExtractNewRecordStateTest.testRouteByField*: the topic comes from a row column (before for deletes).
#[test]
fn transform_unwrap_route_by_field_and_drop_fields_header() {
    let e = envelope();
    let t = make(UNWRAP, &[("route.by.field", "name"), ("delete.tombstone.handling.mode", "rewrite")]);
    assert_eq!(apply(&*t, e.create()).topic, "myRecord");
    assert_eq!(apply(&*t, e.delete()).topic, "myRecord");
    // drop.fields.header.name: optional fields named in the header are removed.
    let t = make(UNWRAP, &[("drop.fields.header.name", "drop")]);
    let mut r = e.create();
    r.headers.add("drop", Some(Schema::array(Schema::string().into_ref()).into_ref()), Value::Array(vec![s("name"), s("id")]));
    assert_eq!(value_of(&apply(&*t, r)), "struct<dummy.Value>{id:int8} | {id=1i8}");
}

struct Outbox {
    row: SchemaRef,
    schema: SchemaRef,
}

/// The outbox table of EventRouterTest: id, aggregatetype, aggregateid, type, payload, plus
/// an int32 partition column and a Timestamp column.
fn outbox() -> Outbox {
    let row = Schema::struct_of([
        ("id", Schema::string().into_ref()),
        ("aggregatetype", Schema::string().into_ref()),
        ("aggregateid", Schema::string().into_ref()),
        ("type", Schema::string().into_ref()),
        ("payload", Schema::string().optional().into_ref()),
        ("part", Schema::int32().optional().into_ref()),
        ("created", Schema::timestamp().optional().into_ref()),
    ])
    .named("dbserver1.public.outboxevent.Value")
    .optional()
    .into_ref();
    let schema = Schema::struct_of([
        ("before", row.clone()),
        ("after", row.clone()),
        ("source", Schema::struct_of([("db", Schema::string().into_ref())]).into_ref()),
        ("op", Schema::string().into_ref()),
        ("ts_ms", Schema::int64().optional().into_ref()),
    ])
    .named("dbserver1.public.outboxevent.Envelope")
    .into_ref();
    Outbox { row, schema }
}

impl Outbox {
    fn event(&self, op: &str, aggregate: &str, payload: Value) -> TransformRecord {
        let row = st(
            &self.row,
            vec![
                s("da8d6de6-3b77-45ff-8f44-57db55a7a06c"),
                s(aggregate),
                s("10711fa5"),
                s("UserCreated"),
                payload,
                Value::Int32(3),
                Value::Int64(1_600_000_000_000),
            ],
        );
        let (before, after) = if op == "d" { (row, Value::Null) } else { (Value::Null, row) };
        let source = st(&self.schema.field("source").unwrap().schema, vec![s("db")]);
        let value = st(&self.schema, vec![before, after, source, s(op), Value::Int64(1_700_000_000_000)]);
        let mut r = keyed(Some(Schema::string()), s("raw-key"), None, value);
        r.value_schema = Some(self.schema.clone());
        r.topic = "dbserver1.public.outboxevent".into();
        r
    }
}

// EventRouterTest.canSkipTombstone / canSkipDeletion / canSkipUpdates / canRouteBasedOnField /
// canSetDefaultMessageKey / canSetTimestampFromDebeziumEnvelopeByDefault; outbox-event-router.adoc.
#[test]
fn transform_event_router_defaults() {
    let o = outbox();
    let t = make(ROUTER, &[]);
    let out = apply(&*t, o.event("c", "User", s("{}")));
    assert_eq!(out.topic, "outbox.event.User");
    assert_eq!(key_of(&out), r#"string | "10711fa5""#);
    assert_eq!(value_of(&out), r#"string? | "{}""#);
    assert_eq!(headers_of(&out.headers), r#"id:string="da8d6de6-3b77-45ff-8f44-57db55a7a06c""#);
    assert_eq!((out.timestamp, out.partition), (Some(1_700_000_000_000), None));
    assert_eq!(apply(&*t, o.event("r", "Address", s("{}"))).topic, "outbox.event.Address");
    assert!(try_apply(&*t, o.event("d", "User", s("{}"))).unwrap().is_none());
    assert!(try_apply(&*t, o.event("u", "User", s("{}"))).unwrap().is_none());
    assert!(try_apply(&*t, record(None, Value::Null)).unwrap().is_none());
    let fatal = make(ROUTER, &[("table.op.invalid.behavior", "fatal")]);
    assert!(apply_err(&*fatal, o.event("u", "User", s("{}"))).contains("unexpected update of the outbox table"));
    let plain = record(Some(Schema::string()), s("not an event"));
    assert_eq!(apply(&*t, plain.clone()), plain);
}

// EventRouterTest.canSetPayloadTypeIntoTheEnvelope / canPassStringKey / canSetPartition /
// canRouteWithCustomReplacement / canSetTimestampByUserDefinedConfiguration / canProduceTombstones.
#[test]
fn transform_event_router_placement_routing_and_tombstones() {
    let o = outbox();
    let t = make(
        ROUTER,
        &[
            (
                "table.fields.additional.placement",
                "type:envelope:payloadType,aggregateid:envelope:payloadId,type:header:payloadType,part:partition",
            ),
            ("route.topic.replacement", "${routedByValue}.events"),
            ("table.field.event.timestamp", "created"),
        ],
    );
    let out = apply(&*t, o.event("c", "User", s("{}")));
    assert_eq!(out.topic, "User.events");
    assert_eq!(
        value_of(&out),
        r#"struct<dbserver1.public.outboxevent.User.Value>{payload:string?,payloadType:string,payloadId:string} | {payload="{}",payloadType="UserCreated",payloadId="10711fa5"}"#
    );
    assert_eq!(headers_of(&out.headers), r#"id:string="da8d6de6-3b77-45ff-8f44-57db55a7a06c" payloadType:string="UserCreated""#);
    assert_eq!((out.partition, out.timestamp), (Some(3), Some(1_600_000_000_000)));

    let t = make(ROUTER, &[("route.tombstone.on.empty.payload", "true")]);
    let out = apply(&*t, o.event("c", "User", Value::Null));
    assert_eq!(
        (out.topic.as_str(), value_of(&out), key_of(&out)),
        ("outbox.event.User", "- | null".to_owned(), r#"string | "10711fa5""#.to_owned())
    );

    let t = make(ROUTER, &[("table.fields.additional.placement", "missing:header")]);
    assert!(apply_err(&*t, o.event("c", "User", s("{}"))).contains("unable to find additional field `missing`"));
    let t = make(ROUTER, &[("table.fields.additional.placement", "missing:header"), ("table.field.additional.missing", "ignore")]);
    assert_eq!(apply(&*t, o.event("c", "User", s("{}"))).topic, "outbox.event.User");
    assert!(config_error(ROUTER, &[("table.fields.additional.placement", "type:body")]).contains("table.fields.additional.placement"));
    let t = make(ROUTER, &[("table.field.event.payload", "nope")]);
    assert_eq!(apply_err(&*t, o.event("c", "User", s("{}"))), "EventRouter: unable to find payload field `nope` in the event");
}

// EventRouterTest.canExpandJsonPayloadIfConfigured / shouldNotExpandJSONPayloadIfNotJson;
// JsonSchemaData: ints are int32, decimals float64, objects named by their path.
#[test]
fn transform_event_router_expands_json_payload() {
    let o = outbox();
    let t = make(ROUTER, &[("table.expand.json.payload", "true")]);
    let json = r#"{"fullName":"John Doe","enabled":true,"rating":4.9,"age":42,"pets":["dog","cat"],"address":{"city":"X"},"none":null,"empty":[]}"#;
    let out = apply(&*t, o.event("c", "User", s(json)));
    assert_eq!(
        value_of(&out),
        r#"struct<payload>{fullName:string?,enabled:boolean?,rating:float64?,age:int32?,pets:array<string?>?,address:struct<payload.address>{city:string?}?}? | {fullName="John Doe",enabled=true,rating=4.9f64,age=42i32,pets=["dog","cat"],address={city="X"}}"#
    );
    let t = make(
        ROUTER,
        &[
            ("table.expand.json.payload", "true"),
            ("table.json.payload.null.behavior", "optional_bytes"),
            ("table.json.payload.empty.array.behavior", "optional_string"),
        ],
    );
    let out = apply(&*t, o.event("c", "User", s(r#"{"none":null,"empty":[]}"#)));
    assert_eq!(value_of(&out), "struct<payload>{none:bytes?,empty:array<string?>?}? | {none=null,empty=[]}");
    // Not JSON: left as the string it was.
    let t = make(ROUTER, &[("table.expand.json.payload", "true")]);
    assert_eq!(value_of(&apply(&*t, o.event("c", "User", s("not json")))), r#"string? | "not json""#);
}
