//! `sluice plan DIR` and `sluice apply DIR`: a directory of connector declarations against a
//! running worker. The files are sent as they are to `POST /connectors-dir/plan|apply`, so
//! the worker parses and validates them exactly as its own `connectors.dir` would; the
//! answer names keys, never values.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context as _};
use serde_json::Value;

pub fn main(apply: bool, args: &[String]) -> anyhow::Result<()> {
    let mut dir = None;
    let mut url = "http://localhost:8083".to_owned();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--url" => {
                url = args.get(i + 1).cloned().ok_or_else(|| anyhow!("--url needs a value"))?;
                i += 1;
            }
            a if a.starts_with("--url=") => url = a["--url=".len()..].to_owned(),
            a if dir.is_none() && !a.starts_with('-') => dir = Some(a.to_owned()),
            a => bail!("unexpected argument '{a}'"),
        }
        i += 1;
    }
    let dir = dir.ok_or_else(|| anyhow!("usage: sluice {} DIR [--url http://HOST:PORT]", if apply { "apply" } else { "plan" }))?;
    let files = read(Path::new(&dir))?;
    let endpoint = format!("{}/connectors-dir/{}", url.trim_end_matches('/'), if apply { "apply" } else { "plan" });
    let agent: ureq::Agent =
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(120)))
            .tls_config(sluice_rest::tls::no_roots())
            .build()
            .into();
    let mut response = agent
        .post(&endpoint)
        .send_json(serde_json::json!({ "files": files }))
        .with_context(|| format!("cannot reach the worker at {url}"))?;
    let status = response.status().as_u16();
    let body: Value =
        response.body_mut().read_json().with_context(|| format!("the worker at {url} answered HTTP {status} without JSON"))?;
    if status != 200 {
        bail!("the worker answered HTTP {status}: {}", body["message"].as_str().unwrap_or(&body.to_string()));
    }
    let items = body["items"].as_array().cloned().unwrap_or_default();
    print!("{}", render(&items));
    let failed = items.iter().any(|i| matches!(i["action"].as_str(), Some("invalid" | "conflict")) || (apply && i.get("errors").is_some()));
    if failed {
        bail!(
            "{} declaration(s) were not {}",
            items.iter().filter(|i| i.get("errors").is_some()).count(),
            if apply { "applied" } else { "valid" }
        );
    }
    Ok(())
}

/// The declaration files of `dir` by file name.
fn read(dir: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.is_file() && sluice_runtime::declared::file::is_declaration_file(&path) {
            let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
            files.insert(path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), text);
        }
    }
    Ok(files)
}

/// One line per connector, then the counts:
/// `update  orders  (orders.json): connection.password, tasks.max`.
fn render(items: &[Value]) -> String {
    let mut out = String::new();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for item in items {
        let action = item["action"].as_str().unwrap_or("?");
        *counts.entry(action).or_default() += 1;
        let mut line = format!("{action:<10} {}", item["name"].as_str().unwrap_or("?"));
        if let Some(file) = item["file"].as_str() {
            line.push_str(&format!("  ({file})"));
        }
        let mut details: Vec<String> =
            item["changed"].as_array().into_iter().flatten().filter_map(|k| k.as_str().map(str::to_owned)).collect();
        if let Some(state) = item["state"].as_str() {
            details.push(format!("state → {state}"));
        }
        if !details.is_empty() {
            line.push_str(&format!(": {}", details.join(", ")));
        }
        out.push_str(&line);
        out.push('\n');
        for e in item["errors"].as_array().into_iter().flatten() {
            out.push_str(&format!("           ! {}\n", e.as_str().unwrap_or("?")));
        }
    }
    let summary: Vec<String> = ["create", "update", "delete", "unchanged", "invalid", "conflict"]
        .iter()
        .map(|a| format!("{} {a}", counts.get(a).copied().unwrap_or(0)))
        .collect();
    out.push_str(&format!("{}\n", summary.join(", ")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_keys_states_errors_and_counts() {
        let items = vec![
            json!({"name": "a", "file": "a.json", "action": "update", "changed": ["rate", "tasks.max"], "state": "PAUSED"}),
            json!({"name": "b.json", "file": "b.json", "action": "invalid", "errors": ["b.json: not valid JSON"]}),
            json!({"name": "c", "file": "c.yaml", "action": "create"}),
        ];
        assert_eq!(
            render(&items),
            "update     a  (a.json): rate, tasks.max, state → PAUSED\n\
             invalid    b.json  (b.json)\n           ! b.json: not valid JSON\n\
             create     c  (c.yaml)\n\
             1 create, 1 update, 0 delete, 0 unchanged, 1 invalid, 0 conflict\n"
        );
    }
}
