//! Config providers: `${provider:[path:]key}` placeholders in worker and connector configs,
//! resolved when a config is used, never when it is stored. So the config topic and REST
//! keep the placeholder, and a secret kept in a file or variable never reaches them.
//!
//! Providers (Kafka's classes, or their short names):
//! - `org.apache.kafka.common.config.provider.FileConfigProvider` (`file`):
//!   `${file:/path/to/x.properties:key}`
//! - `org.apache.kafka.common.config.provider.DirectoryConfigProvider` (`directory`):
//!   `${directory:/path/to/dir:filename}` → the file's contents
//! - `org.apache.kafka.common.config.provider.EnvVarConfigProvider` (`env`): `${env:VAR}`
//!
//! Each takes `config.providers.<name>.param.allowed.paths` (comma-separated) as in Kafka.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sluice_api::{ConnectError, ConnectResult, Props};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    File,
    Directory,
    Env,
}

#[derive(Debug, Clone)]
struct Provider {
    kind: Kind,
    allowed_paths: Option<Vec<PathBuf>>,
}

#[derive(Debug, Clone, Default)]
pub struct ConfigProviders {
    providers: BTreeMap<String, Provider>,
}

impl ConfigProviders {
    pub fn from_worker_props(props: &Props) -> ConnectResult<Self> {
        let mut providers = BTreeMap::new();
        let Some(names) = props.get("config.providers") else {
            return Ok(Self::default());
        };
        for name in names.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let class_key = format!("config.providers.{name}.class");
            let class = props
                .get(&class_key)
                .ok_or_else(|| ConnectError::config(&class_key, "missing: each provider listed in config.providers needs a class"))?;
            let kind = match class.trim() {
                "org.apache.kafka.common.config.provider.FileConfigProvider" | "FileConfigProvider" | "file" => Kind::File,
                "org.apache.kafka.common.config.provider.DirectoryConfigProvider" | "DirectoryConfigProvider" | "directory" => Kind::Directory,
                "org.apache.kafka.common.config.provider.EnvVarConfigProvider" | "EnvVarConfigProvider" | "env" => Kind::Env,
                other => {
                    return Err(ConnectError::config(
                        &class_key,
                        format!("unknown config provider class '{other}'; available: FileConfigProvider, DirectoryConfigProvider, EnvVarConfigProvider"),
                    ))
                }
            };
            let allowed_paths = props
                .get(&format!("config.providers.{name}.param.allowed.paths"))
                .map(|s| s.split(',').map(str::trim).filter(|p| !p.is_empty()).map(PathBuf::from).collect());
            providers.insert(name.to_owned(), Provider { kind, allowed_paths });
        }
        Ok(Self { providers })
    }

    /// Resolves every placeholder in `props`. A placeholder naming an unknown provider is
    /// left as it is (as Kafka does); one whose variable, file or key is missing is an error
    /// naming the config key (never the value).
    pub fn resolve_all(&self, props: &Props) -> ConnectResult<Props> {
        props.iter().map(|(k, v)| Ok((k.clone(), self.resolve(k, v)?))).collect()
    }

    fn resolve(&self, key: &str, value: &str) -> ConnectResult<String> {
        if self.providers.is_empty() || !value.contains("${") {
            return Ok(value.to_owned());
        }
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                return Ok(out);
            };
            let inner = &after[..end];
            match self.lookup(key, inner)? {
                Some(v) => out.push_str(&v),
                None => out.push_str(&rest[start..start + 2 + end + 1]),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn lookup(&self, key: &str, inner: &str) -> ConnectResult<Option<String>> {
        let Some((name, remainder)) = inner.split_once(':') else {
            return Ok(None);
        };
        let Some(provider) = self.providers.get(name) else {
            return Ok(None);
        };
        let (path, item) = match remainder.rsplit_once(':') {
            Some((p, k)) => (p, k),
            None => ("", remainder),
        };
        let fail = |what: String| ConnectError::config(key, format!("config provider '{name}' could not resolve the value: {what}"));
        match provider.kind {
            Kind::Env => std::env::var(item).map(Some).map_err(|_| fail(format!("environment variable {item} is not set"))),
            Kind::File => {
                let path = allowed(provider, Path::new(path)).map_err(&fail)?;
                let text = std::fs::read_to_string(&path).map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
                let props = super::config::parse_properties(&text);
                props.get(item).cloned().map(Some).ok_or_else(|| fail(format!("{} has no key {item}", path.display())))
            }
            Kind::Directory => {
                let dir = allowed(provider, Path::new(path)).map_err(&fail)?;
                let file = dir.join(item);
                std::fs::read_to_string(&file).map(Some).map_err(|e| fail(format!("cannot read {}: {e}", file.display())))
            }
        }
    }
}

fn allowed(provider: &Provider, path: &Path) -> Result<PathBuf, String> {
    if let Some(list) = &provider.allowed_paths {
        if !list.iter().any(|p| path.starts_with(p)) {
            return Err(format!("{} is not in allowed.paths", path.display()));
        }
    }
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn file_directory_and_env_providers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("creds.properties"), "password=s3cret\n").unwrap();
        std::fs::write(dir.path().join("token"), "tok").unwrap();
        std::env::set_var("SLUICE_PROVIDER_TEST", "fromenv");
        let worker = props(&[
            ("config.providers", "file,dir,env"),
            ("config.providers.file.class", "org.apache.kafka.common.config.provider.FileConfigProvider"),
            ("config.providers.dir.class", "org.apache.kafka.common.config.provider.DirectoryConfigProvider"),
            ("config.providers.env.class", "org.apache.kafka.common.config.provider.EnvVarConfigProvider"),
        ]);
        let p = ConfigProviders::from_worker_props(&worker).unwrap();
        let d = dir.path().display();
        let input = props(&[
            ("a", &format!("${{file:{d}/creds.properties:password}}")),
            ("b", &format!("x-${{dir:{d}:token}}-y")),
            ("c", "${env:SLUICE_PROVIDER_TEST}"),
            ("d", "${unknown:x}"),
        ]);
        let out = p.resolve_all(&input).unwrap();
        assert_eq!(out["a"], "s3cret");
        assert_eq!(out["b"], "x-tok-y");
        assert_eq!(out["c"], "fromenv");
        assert_eq!(out["d"], "${unknown:x}");
        let err = p.resolve_all(&props(&[("database.password", &format!("${{file:{d}/creds.properties:nope}}"))])).unwrap_err();
        assert!(err.to_string().contains("database.password"), "{err}");
        assert!(!err.to_string().contains("s3cret"));
    }

    #[test]
    fn unknown_provider_class_is_named() {
        let err =
            ConfigProviders::from_worker_props(&props(&[("config.providers", "v"), ("config.providers.v.class", "Vault")])).unwrap_err();
        assert!(err.to_string().contains("config.providers.v.class"), "{err}");
    }
}
