//! `RegexRouter`: when the whole topic name matches `regex`, replaces it with
//! `replacement`, where `$1` and `${name}` refer to groups (Java's replacement syntax).

use regex::{Captures, Regex};
use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props};

use super::predicates::full_match_regex;
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Update the record topic using the configured regular expression and replacement string.<p/>Under the hood, the regex is compiled to a <code>java.util.regex.Pattern</code>. If the pattern matches the input topic, <code>java.util.regex.Matcher#replaceFirst()</code> is used with the replacement string to obtain the new topic.";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new("regex", ConfigType::String, Importance::High, "Regular expression to use for matching."))
        .define(ConfigKey::new("replacement", ConfigType::String, Importance::High, "Replacement string."))
}

pub(crate) struct RegexRouter {
    regex: Regex,
    replacement: String,
}

impl RegexRouter {
    pub(crate) fn new(regex: &str, replacement: &str, regex_key: &str, replacement_key: &str) -> ConnectResult<Self> {
        let regex = full_match_regex(regex, regex_key)?;
        // Group references are checked once, here, rather than on every record.
        check_replacement(&regex, replacement).map_err(|m| ConnectError::config(replacement_key, m))?;
        Ok(Self { regex, replacement: replacement.to_owned() })
    }

    /// The new topic, or `None` when the topic does not match.
    pub(crate) fn route(&self, topic: &str) -> Option<String> {
        let caps = self.regex.captures(topic)?;
        Some(expand_java_replacement(&self.regex, &caps, &self.replacement).expect("replacement checked at configuration"))
    }
}

impl Transform for RegexRouter {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        if let Some(topic) = self.route(&record.topic) {
            record.topic = topic;
        }
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props) -> ConnectResult<Box<dyn Transform>> {
    config_def().parse(props)?;
    Ok(Box::new(RegexRouter::new(&props["regex"], &props["replacement"], "regex", "replacement")?))
}

fn check_replacement(regex: &Regex, replacement: &str) -> Result<(), String> {
    let groups = regex.captures_len() - 1; // minus group 0; the `^(?:…)$` wrapper captures nothing
    let names: Vec<&str> = regex.capture_names().flatten().collect();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next().ok_or("character to be escaped is missing at the end of the replacement")?;
            }
            '$' => match chars.next() {
                Some('{') => {
                    let name: String = chars.by_ref().take_while(|c| *c != '}').collect();
                    if !names.contains(&name.as_str()) {
                        return Err(format!("no group with name {{{name}}} in the regex"));
                    }
                }
                Some(d) if d.is_ascii_digit() => {
                    if d.to_digit(10).unwrap_or(0) as usize > groups {
                        return Err(format!("no group {d} in the regex"));
                    }
                }
                _ => return Err("illegal group reference in the replacement".to_owned()),
            },
            _ => {}
        }
    }
    Ok(())
}

/// Java's `Matcher.appendReplacement` syntax: `\x` is a literal `x`, `$n` takes as many
/// digits as still name a group, `${name}` a named group.
pub(crate) fn expand_java_replacement(regex: &Regex, caps: &Captures<'_>, replacement: &str) -> Result<String, String> {
    // The `^(?:…)$` wrapper adds no capturing group, so group numbers are the user's.
    let groups = regex.captures_len() - 1;
    let mut out = String::new();
    let chars: Vec<char> = replacement.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                let c = chars.get(i + 1).ok_or("character to be escaped is missing")?;
                out.push(*c);
                i += 2;
            }
            '$' => {
                if chars.get(i + 1) == Some(&'{') {
                    let end = chars[i + 2..].iter().position(|c| *c == '}').ok_or("named group is missing a closing '}'")?;
                    let name: String = chars[i + 2..i + 2 + end].iter().collect();
                    out.push_str(caps.name(&name).map(|m| m.as_str()).unwrap_or(""));
                    i += 3 + end;
                } else {
                    let mut j = i + 1;
                    let mut num: usize = chars.get(j).and_then(|c| c.to_digit(10)).ok_or("illegal group reference")? as usize;
                    j += 1;
                    while let Some(d) = chars.get(j).and_then(|c| c.to_digit(10)) {
                        let next = num * 10 + d as usize;
                        if next > groups {
                            break;
                        }
                        num = next;
                        j += 1;
                    }
                    out.push_str(caps.get(num).map(|m| m.as_str()).unwrap_or(""));
                    i = j;
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}
