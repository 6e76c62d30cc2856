//! The status page (`GET /ui`) in a real browser (headless chromium through chromedriver):
//! a worker whose API asks for bearer tokens runs healthy connectors (one declared in a
//! file) and a failed one. An admin sees them all, the failed one first with its trace and no
//! secret, where each came from, counts following new records, pauses and resumes a
//! connector and deletes another through the page's buttons (each behind a confirmation),
//! and the REST API shows the effect; a read-only token sees no buttons; behind a path prefix
//! the page works the same; without a token the page asks for one. Screenshots go to the test's output directory.

use std::path::PathBuf;
use std::time::Duration;

use sluice_tests::browser::{Browser, PrefixProxy};
use sluice_tests::{json, rest_token, Extras, Launch, Worker};

fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The connectors in the order the page shows them.
fn order(b: &Browser) -> Vec<String> {
    let v = b.eval("return [...document.querySelectorAll('.card')].map(c => c.dataset.connector)");
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

#[test]
fn the_status_page_shows_the_fleet_and_acts_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let (admin, admin_line) = rest_token("ops", "admin");
    let (viewer, viewer_line) = rest_token("viewer", "read");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{admin_line}\n{viewer_line}\n")).unwrap();
    // One connector is declared in a file of the connectors directory.
    let cdir = dir.path().join("connectors");
    std::fs::create_dir_all(&cdir).unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "{\"id\": 1}\n").unwrap();
    let declared = json!({"name": "declared", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "declared"}});
    std::fs::write(cdir.join("declared.json"), declared.to_string()).unwrap();
    let w = Worker::launch_with(
        &dir.path().join("w"),
        Launch::Properties {
            props: vec![
                ("sluice.rest.auth.tokens.file".to_owned(), tokens.display().to_string()),
                ("connectors.dir".to_owned(), cdir.display().to_string()),
                ("connectors.dir.interval.ms".to_owned(), "1000".to_owned()),
            ],
            connector_files: Vec::new(),
        },
        Extras { env: Vec::new(), authorization: Some(format!("Bearer {admin}")) },
    );
    let file_source = |topic: &str| json!({"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": topic});
    for (name, config) in [
        ("lines", file_source("orders")),
        ("scratch", file_source("scratch")),
        (
            // A warehouse sink whose database is not there: it fails, with a trace.
            "wh",
            json!({"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "orders",
                   "connection.url": "jdbc:postgresql://127.0.0.1:1/shop?user=app", "connection.password": "PagePw-8d1f",
                   "max.retries": "0", "connection.attempts": "1", "connection.backoff.ms": "10"}),
        ),
    ] {
        let (code, body) = w.post("/connectors", &json!({"name": name, "config": config}));
        assert_eq!(code, 201, "{name}: {body}");
    }
    w.wait_running("lines", 1);
    w.wait_running("declared", 1);
    let failed = w.wait_for("/connectors/wh/status", Duration::from_secs(60), |_, b| b["tasks"][0]["state"] == "FAILED");
    let trace = failed["tasks"][0]["trace"].as_str().unwrap().to_owned();

    let b = Browser::start();
    b.goto(&w.url(&format!("/ui#token={admin}")));
    let text = b.wait_text(Duration::from_secs(30), "the four connectors", |t| {
        t.contains("lines") && t.contains("scratch") && t.contains("FAILED") && t.contains("4 connectors") && t.contains("declared.json")
    });
    assert!(text.contains("ops (admin)"), "the signed-in token is named: {text}");
    assert_eq!(order(&b), ["wh", "declared", "lines", "scratch"], "the failed connector first");
    let origin = |c: &str| b.eval(&format!("return document.querySelector('.card[data-connector={c}] [data-origin]').dataset.origin"));
    assert_eq!((origin("declared"), origin("lines")), (json!("file"), json!("rest")), "where each connector came from");
    assert!(!b.eval("return location.hash").as_str().unwrap_or_default().contains(&admin), "the token leaves the address bar");
    // The failed task's trace, one click away; the config, with its password hidden.
    b.click(".card[data-connector=wh] details[data-section='Last error'] summary");
    b.click(".card[data-connector=wh] details[data-section='Config'] summary");
    let first_line = trace.lines().next().unwrap();
    let text = b.wait_text(Duration::from_secs(10), "the trace", |t| t.contains(first_line));
    assert!(text.contains("[hidden]"), "the password shows as [hidden]: {text}");
    let html = b.eval("return document.documentElement.outerHTML").as_str().unwrap().to_owned();
    assert!(!html.contains("PagePw-8d1f"), "the password is on the page");
    b.screenshot(&shots().join("fleet-admin.png"));
    // Counts follow the records: five more lines in the source's file.
    let polled =
        |b: &Browser| b.eval("return Number(document.querySelector('.card[data-connector=lines] .stats').dataset.recordsIn)").as_u64();
    b.wait_text(Duration::from_secs(15), "the first record counted", |_| polled(&b).is_some_and(|n| n >= 1));
    let before = polled(&b).unwrap();
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new().append(true).open(&input).unwrap();
    f.write_all((2..=6).map(|i| format!("{{\"id\": {i}}}\n")).collect::<String>().as_bytes()).unwrap();
    b.wait_text(Duration::from_secs(20), "five more records in", |_| polled(&b).is_some_and(|n| n >= before + 5));
    // Per task too: the source's one task counts the same records, with its rate.
    let task_polled = |b: &Browser| {
        b.eval("return Number(document.querySelector('.card[data-connector=lines] tr[data-task=\"0\"] [data-task-records-in]').dataset.taskRecordsIn)")
            .as_u64()
    };
    b.wait_text(Duration::from_secs(10), "the task's count", |_| task_polled(&b).is_some_and(|n| n >= before + 5));
    let row = b.eval("return document.querySelector('.card[data-connector=lines] tr[data-task=\"0\"]').textContent");
    assert!(row.as_str().is_some_and(|r| r.contains("/s) · out ")), "the task row shows records in and out with rates: {row}");
    let errors = b.eval("return Number(document.querySelector('.card[data-connector=wh] .stats').dataset.errors)");
    assert!(errors.as_u64().is_some(), "the sink's error count is shown: {errors}");

    // Restart the failed task from its row: the API takes the request (the access log shows
    // it) and the task fails again (the database is still away).
    let (code, body) = w.put("/admin/loggers/sluice_rest", &json!({"level": "DEBUG"}));
    assert_eq!(code, 200, "{body}");
    b.click(".card[data-connector=wh] details[data-section='Tasks'] summary");
    b.click("button[data-action=restart-task][data-connector=wh][data-task='0']");
    assert!(b.accept_dialog().contains("Restart wh task 0"));
    w.eventually(Duration::from_secs(30), "the page's task restart in the access log", || {
        sluice_tests::strip_ansi(&w.output()).lines().any(|l| l.contains("method=POST path=\"/connectors/wh/tasks/0/restart\" status=204"))
    });
    w.wait_for("/connectors/wh/status", Duration::from_secs(60), |_, b| b["tasks"][0]["state"] == "FAILED");

    // Pause and resume through the page; the API shows each.
    b.click("button[data-action=pause][data-connector=lines]");
    assert!(b.accept_dialog().contains("Pause lines"));
    w.wait_for("/connectors/lines/status", Duration::from_secs(30), |_, s| s["connector"]["state"] == "PAUSED");
    b.wait_text(Duration::from_secs(10), "PAUSED on the page", |t| t.contains("PAUSED"));
    b.click("button[data-action=resume][data-connector=lines]");
    b.accept_dialog();
    w.wait_running("lines", 1);
    // Delete, behind its confirmation.
    b.click("button[data-action=delete][data-connector=scratch]");
    assert!(b.accept_dialog().contains("Delete scratch"));
    w.wait_for("/connectors/scratch", Duration::from_secs(30), |code, _| code == 404);
    b.wait_text(Duration::from_secs(10), "three connectors left", |t| t.contains("3 connectors") && !t.contains("scratch"));
    b.screenshot(&shots().join("fleet-after-actions.png"));
    drop(b);

    // A read-only token sees the fleet and no buttons.
    let b = Browser::start();
    b.goto(&w.url(&format!("/ui#token={viewer}")));
    let text = b.wait_text(Duration::from_secs(30), "the fleet for the viewer", |t| t.contains("viewer (read)") && t.contains("wh"));
    assert!(text.contains("lines"));
    assert_eq!(b.count("button[data-action]"), 0, "a read-only user sees no action buttons");
    b.screenshot(&shots().join("fleet-read-only.png"));
    drop(b);

    // Behind a path prefix (an ingress serving the worker under /sluice/), the page reads and
    // acts through the same prefix.
    let proxy = PrefixProxy::start("/sluice", w.port);
    let b = Browser::start();
    b.goto(&format!("http://127.0.0.1:{}/sluice/ui#token={admin}", proxy.port));
    b.wait_text(Duration::from_secs(30), "the fleet behind the prefix", |t| t.contains("3 connectors") && t.contains("declared.json"));
    b.click("button[data-action=stop][data-connector=lines]");
    b.accept_dialog();
    w.wait_for("/connectors/lines/status", Duration::from_secs(30), |_, s| s["connector"]["state"] == "STOPPED");
    drop(b);

    // Without credentials the page asks for them (and shows no data).
    let b = Browser::start();
    b.goto(&w.url("/ui"));
    let text = b.wait_text(Duration::from_secs(30), "the sign-in form", |t| t.contains("asks for credentials"));
    assert!(!text.contains("wh") && !text.contains("lines"), "{text}");
    eprintln!("screenshots in {}", shots().display());
}
