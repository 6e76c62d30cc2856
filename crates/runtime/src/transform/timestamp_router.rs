//! `TimestampRouter`: topic = `topic.format` with `${topic}` and `${timestamp}` (the record
//! timestamp formatted with `timestamp.format`, a `SimpleDateFormat` pattern, in UTC).

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props};

use super::require::data_error;
use super::temporal::DatePattern;
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Update the record's topic field as a function of the original topic value and the record timestamp.<p/>This is mainly useful for sink connectors, since the topic field is often used to determine the equivalent entity name in the destination system(e.g. database table or search index name).";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new()
        .define(
            ConfigKey::new("topic.format", ConfigType::String, Importance::High, "Format string which can contain <code>${topic}</code> and <code>${timestamp}</code> as placeholders for the topic and timestamp, respectively.")
                .default_value("${topic}-${timestamp}"),
        )
        .define(
            ConfigKey::new("timestamp.format", ConfigType::String, Importance::High, "Format string for the timestamp that is compatible with <code>java.text.SimpleDateFormat</code>.")
                .default_value("yyyyMMdd"),
        )
}

struct TimestampRouter {
    topic_format: String,
    timestamp_format: DatePattern,
}

impl Transform for TimestampRouter {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        let Some(ts) = record.timestamp else {
            return Err(data_error("TimestampRouter", format_args!("the record for topic {} has no timestamp", record.topic)));
        };
        let formatted = self.timestamp_format.format(ts);
        record.topic = self.topic_format.replace("${topic}", &record.topic).replace("${timestamp}", &formatted);
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props) -> ConnectResult<Box<dyn Transform>> {
    config_def().parse(props)?;
    let topic_format = props.get("topic.format").cloned().unwrap_or_else(|| "${topic}-${timestamp}".to_owned());
    let pattern = props.get("timestamp.format").map(String::as_str).unwrap_or("yyyyMMdd");
    let timestamp_format = DatePattern::compile(pattern).map_err(|e| ConnectError::config("timestamp.format", e))?;
    Ok(Box::new(TimestampRouter { topic_format, timestamp_format }))
}
