//! `sluice`: a Kafka Connect worker with compiled-in connectors.
//!
//! ```text
//! sluice                                   standalone on defaults (REST :8083, ./sluice-data)
//! sluice standalone WORKER.properties [CONNECTOR.json|CONNECTOR.properties ...]
//! sluice distributed [WORKER.properties]   a worker of the group `group.id`, all state in Kafka
//! sluice topics list|describe|consume ...  read the embedded log
//! sluice health [URL]                     container health check
//! sluice rest-token NAME read|admin        a bearer token for the REST API, and its line for the tokens file
//! sluice plan|apply DIR [--url URL]         connector files against a running worker
//! sluice --version
//! ```
//! The binary only wires; everything it runs lives in the library crates.

mod connector_file;
mod health;
mod plan;
mod standalone;
mod topics;

use std::process::ExitCode;

use standalone::{Args, Mode};

/// Records are many small allocations; mimalloc handles them with less contention than
/// glibc's allocator (measured in bench/datagen.py).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage:
  sluice                                       run standalone with defaults (REST on :8083, data in ./sluice-data)
  sluice standalone WORKER.properties [CONNECTOR.json|CONNECTOR.properties ...]
  sluice distributed [WORKER.properties]       a worker of the Connect cluster group.id; configs, offsets and statuses in Kafka's internal topics
                                               (no file: CONNECT_* environment variables alone, as in the container image)
  sluice topics list [--data-dir DIR]
  sluice topics describe TOPIC [--data-dir DIR]
  sluice topics consume TOPIC [--data-dir DIR] [--from-beginning] [--partition N] [--offset N] [--max-messages N] [--follow]
  sluice health [http://HOST:PORT]            exit 0 when the worker's /health answers 200 (for container health checks)
  sluice rest-token NAME read|admin           a new bearer token (printed once) and its line for sluice.rest.auth.tokens.file
  sluice plan DIR [--url http://HOST:PORT]    what applying the connector files of DIR would create, update or delete (key names only)
  sluice apply DIR [--url http://HOST:PORT]   apply them to a running worker
  --connectors-dir DIR                        (with sluice, standalone or distributed) keep the connectors declared in DIR
  sluice --version";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let result = match take_connectors_dir(&mut args) {
        Ok(dir) => run(args, dir),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `--connectors-dir DIR` (or `=DIR`) anywhere on the line, taken out of `args`.
fn take_connectors_dir(args: &mut Vec<String>) -> anyhow::Result<Option<String>> {
    let Some(i) = args.iter().position(|a| a == "--connectors-dir" || a.starts_with("--connectors-dir=")) else { return Ok(None) };
    let flag = args.remove(i);
    if let Some(dir) = flag.strip_prefix("--connectors-dir=") {
        return Ok(Some(dir.to_owned()));
    }
    if i < args.len() {
        return Ok(Some(args.remove(i)));
    }
    Err(anyhow::anyhow!("--connectors-dir needs a directory"))
}

fn run(args: Vec<String>, connectors_dir: Option<String>) -> anyhow::Result<()> {
    let worker = |worker_file: Option<String>, connector_files: Vec<String>| Args { worker_file, connector_files, connectors_dir: connectors_dir.clone() };
    match args.first().map(String::as_str) {
        None => standalone::run_mode(Mode::Standalone, worker(None, Vec::new())),
        Some("--version" | "-V" | "version") => {
            println!("sluice {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Some("--help" | "-h" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some("standalone") => match args.get(1) {
            Some(file) if !file.starts_with('-') => standalone::run_mode(Mode::Standalone, worker(Some(file.clone()), args[2..].to_vec())),
            _ => standalone::run_mode(Mode::Standalone, worker(None, Vec::new())),
        },
        Some("distributed") => match args.get(1) {
            // No file: configured by CONNECT_* variables alone, as Confluent's image runs it.
            None => standalone::run_mode(Mode::Distributed, worker(None, Vec::new())),
            Some(file) if !file.starts_with('-') && args.len() == 2 => standalone::run_mode(Mode::Distributed, worker(Some(file.clone()), Vec::new())),
            _ => Err(anyhow::anyhow!("usage: sluice distributed [WORKER.properties] (connectors are created through the REST API or connectors.dir)")),
        },
        Some("topics") => topics::main(&args[1..]),
        Some("health") => health::main(args.get(1).map(String::as_str)),
        Some("rest-token") => match (args.get(1), args.get(2), args.len()) {
            (Some(name), Some(role), 3) => {
                let (token, line) = sluice_rest::auth::new_token(name, role).map_err(|e| anyhow::anyhow!(e))?;
                println!("{token}");
                eprintln!("The token above is shown once: give it to the client (Authorization: Bearer <token>).");
                eprintln!("Add this line to the file named by sluice.rest.auth.tokens.file and restart the worker:");
                eprintln!("{line}");
                Ok(())
            }
            _ => Err(anyhow::anyhow!("usage: sluice rest-token NAME read|admin")),
        },
        Some(command @ ("plan" | "apply")) => plan::main(command == "apply", &args[1..]),
        Some(other) => Err(anyhow::anyhow!("unknown command '{other}'\n{USAGE}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connectors_dir_flag_anywhere() {
        let mut a: Vec<String> = ["standalone", "w.properties", "--connectors-dir", "/c", "x.json"].map(String::from).to_vec();
        assert_eq!(take_connectors_dir(&mut a).unwrap().as_deref(), Some("/c"));
        assert_eq!(a, ["standalone", "w.properties", "x.json"]);
        let mut a: Vec<String> = ["--connectors-dir=/d"].map(String::from).to_vec();
        assert_eq!(take_connectors_dir(&mut a).unwrap().as_deref(), Some("/d"));
        assert!(a.is_empty());
        let mut a: Vec<String> = ["distributed", "--connectors-dir"].map(String::from).to_vec();
        assert!(take_connectors_dir(&mut a).is_err());
        let mut a: Vec<String> = ["topics", "list"].map(String::from).to_vec();
        assert_eq!(take_connectors_dir(&mut a).unwrap(), None);
    }
}
