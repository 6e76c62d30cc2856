//! `sluice`: a Kafka Connect worker with compiled-in connectors.
//!
//! ```text
//! sluice                                   standalone on defaults (REST :8083, ./sluice-data)
//! sluice standalone WORKER.properties [CONNECTOR.json|CONNECTOR.properties ...]
//! sluice distributed [WORKER.properties]   a worker of the group `group.id`, all state in Kafka
//! sluice topics list|describe|consume ...  read the embedded log
//! sluice health [URL]                     container health check
//! sluice --version
//! ```
//! The binary only wires; everything it runs lives in the library crates.

mod connector_file;
mod health;
mod standalone;
mod topics;

use std::process::ExitCode;

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
  sluice --version";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None => standalone::main(None, Vec::new()),
        Some("--version" | "-V" | "version") => {
            println!("sluice {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Some("--help" | "-h" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some("standalone") => match args.get(1) {
            Some(worker) if !worker.starts_with('-') => standalone::main(Some(worker.clone()), args[2..].to_vec()),
            _ => standalone::main(None, Vec::new()),
        },
        Some("distributed") => match args.get(1) {
            // No file: configured by CONNECT_* variables alone, as Confluent's image runs it.
            None => standalone::run_mode(standalone::Mode::Distributed, None, Vec::new()),
            Some(worker) if !worker.starts_with('-') && args.len() == 2 => {
                standalone::run_mode(standalone::Mode::Distributed, Some(worker.clone()), Vec::new())
            }
            _ => Err(anyhow::anyhow!("usage: sluice distributed [WORKER.properties] (connectors are created through the REST API)")),
        },
        Some("topics") => topics::main(&args[1..]),
        Some("health") => health::main(args.get(1).map(String::as_str)),
        Some(other) => Err(anyhow::anyhow!("unknown command '{other}'\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
