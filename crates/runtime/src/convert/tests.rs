//! The registry: class names, aliases, configuration definitions and creation.

use sluice_api::{Props, Schema, Value};

use super::*;

#[test]
fn every_kafka_converter_is_listed_with_its_aliases() {
    let classes: Vec<&str> = converters().iter().map(|p| p.class).collect();
    assert_eq!(
        classes,
        [
            "org.apache.kafka.connect.json.JsonConverter",
            "org.apache.kafka.connect.storage.StringConverter",
            "org.apache.kafka.connect.converters.ByteArrayConverter",
            "org.apache.kafka.connect.converters.LongConverter",
            "org.apache.kafka.connect.converters.IntegerConverter",
            "org.apache.kafka.connect.converters.ShortConverter",
            "org.apache.kafka.connect.converters.FloatConverter",
            "org.apache.kafka.connect.converters.DoubleConverter",
            "org.apache.kafka.connect.converters.BooleanConverter",
        ]
    );
    assert_eq!(find_converter("Json").map(|p| p.class), Some(json::CLASS));
    assert_eq!(find_converter("JsonConverter").map(|p| p.class), Some(json::CLASS));
    assert_eq!(find_converter("org.apache.kafka.connect.storage.StringConverter").map(|p| p.class), Some(string::CLASS));
    assert_eq!(find_converter("Long").map(|p| p.class), Some(number::LONG_CLASS));
    assert!(find_converter("json").is_none());
    assert!(find_converter("SimpleHeaderConverter").is_none());
    assert!(find_converter("io.confluent.connect.avro.AvroConverter").is_none());

    assert_eq!(find_header_converter("Simple").map(|p| p.class), Some(header::CLASS));
    assert_eq!(find_header_converter("org.apache.kafka.connect.storage.SimpleHeaderConverter").map(|p| p.class), Some(header::CLASS));
    assert_eq!(find_header_converter("JsonConverter").map(|p| p.class), Some(json::CLASS));
    assert!(find_header_converter("Json").is_none());
    assert_eq!(header_converters().len(), 10);
}

#[test]
fn every_plugin_creates_and_round_trips_its_type() {
    let empty = Props::new();
    let cases: &[(&str, Value)] = &[
        ("Json", Value::Int64(5)),
        ("String", Value::from("s")),
        ("ByteArray", Value::Bytes(vec![1, 2])),
        ("Long", Value::Int64(-5)),
        ("Integer", Value::Int32(-5)),
        ("Short", Value::Int16(-5)),
        ("Float", Value::Float32(0.5)),
        ("Double", Value::Float64(0.5)),
        ("Boolean", Value::Boolean(true)),
    ];
    for (alias, value) in cases {
        let plugin = find_converter(alias).unwrap();
        for is_key in [true, false] {
            let c = (plugin.create)(&empty, is_key).unwrap_or_else(|e| panic!("{alias}: {e}"));
            let bytes = c.from_connect("t", None, value).unwrap();
            // Json with schemas on and no schema writes {"schema":null,"payload":5}.
            let (_, back) = c.to_connect("t", bytes.as_deref()).unwrap();
            assert_eq!(&back, value, "{alias}");
        }
        let def = (plugin.config_def)();
        assert!(def.key(TYPE_CONFIG).is_some_and(|k| k.required()), "{alias}");
    }
    for plugin in header_converters() {
        let c = (plugin.create)(&empty).unwrap_or_else(|e| panic!("{}: {e}", plugin.class));
        assert_eq!(c.from_connect_header("t", "h", None, &Value::Null).unwrap(), None, "{}", plugin.class);
    }
    let simple = find_header_converter("Simple").unwrap();
    assert!((simple.config_def)().keys().is_empty());
}

#[test]
fn plugins_validate_their_properties() {
    let mut props = Props::new();
    props.insert("schemas.enable".to_owned(), "maybe".to_owned());
    let err = (find_converter("Json").unwrap().create)(&props, false).err().unwrap();
    assert!(err.to_string().contains("schemas.enable"), "{err}");
    // converter.type is set from the role, whatever the properties say.
    props.clear();
    props.insert(TYPE_CONFIG.to_owned(), "sideways".to_owned());
    assert!((find_converter("String").unwrap().create)(&props, true).is_ok());
    // Unknown keys (e.g. the worker's other settings) are ignored, as Kafka does.
    props.insert("some.other.key".to_owned(), "x".to_owned());
    assert!((find_converter("Long").unwrap().create)(&props, false).is_ok());
    // The definitions answer validation: converter.type is required there, as in Kafka.
    let validated = JsonConverter::config_def().validate(&Props::new());
    let ty = validated.iter().find(|v| v.name == TYPE_CONFIG).unwrap();
    assert_eq!(ty.recommended_values, ["key", "value", "header"]);
    assert!(!ty.errors.is_empty());
}

#[test]
fn converter_type_names() {
    assert_eq!(ConverterType::parse("KEY"), Some(ConverterType::Key));
    assert_eq!(ConverterType::parse("header"), Some(ConverterType::Header));
    assert_eq!(ConverterType::parse("nope"), None);
    assert_eq!(ConverterType::Value.name(), "value");
    assert_eq!(type_name(Schema::int8().kind), "INT8");
    assert_eq!(value_type_name(&Value::Null), "null");
}
