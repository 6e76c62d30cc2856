//! The REST API over HTTPS, configured with Kafka Connect's keys: an `https://` listener
//! beside the `http://` one, PKCS12 and PEM keystores, the `listeners.https.` prefix, mutual
//! TLS (`ssl.client.auth` required and requested), weak settings refused by name, and a
//! three-worker cluster whose followers forward writes to the leader over HTTPS with
//! client certificates and Basic authentication. Certificates come from `openssl`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_tests::{basic_auth, free_port, json, refuses_to_start, Extras, KafkaBroker, Launch, Worker};

/// A test PKI: a CA, a server certificate for 127.0.0.1 and localhost, a client certificate,
/// and a second CA nobody trusts with a client certificate of its own.
struct Pki {
    dir: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").current_dir(dir).args(args).output().expect("run openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let pki = Pki { dir: dir.to_path_buf() };
        pki.ca("ca");
        pki.ca("rogue");
        std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
            .unwrap();
        std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
        pki.leaf("server", "ca", "server.ext");
        pki.leaf("client", "ca", "client.ext");
        pki.leaf("intruder", "rogue", "client.ext");
        // The server's key and chain in one PEM file, and as a PKCS12 store.
        let pem = [pki.read("server.key"), pki.read("server.crt"), pki.read("ca.crt")].concat();
        std::fs::write(dir.join("server.pem"), pem).unwrap();
        openssl(
            dir,
            &[
                "pkcs12",
                "-export",
                "-in",
                "server.crt",
                "-inkey",
                "server.key",
                "-certfile",
                "ca.crt",
                "-out",
                "server.p12",
                "-passout",
                "pass:ks-secret-41",
            ],
        );
        pki
    }

    fn ca(&self, name: &str) {
        openssl(
            &self.dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "2",
                "-subj",
                &format!("/CN=sluice test {name}"),
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.crt"),
            ],
        );
    }

    fn leaf(&self, name: &str, ca: &str, ext: &str) {
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-subj",
                &format!("/CN={name}"),
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
            ],
        );
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                &format!("{ca}.crt"),
                "-CAkey",
                &format!("{ca}.key"),
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                ext,
                "-out",
                &format!("{name}.crt"),
            ],
        );
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.dir.join(name)).unwrap()
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_owned()
    }

    /// A client trusting `ca`, presenting `cert` (`name.crt` and `name.key`) when given.
    fn client(&self, ca: &str, cert: Option<&str>) -> ureq::Agent {
        let roots: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&self.read(&format!("{ca}.crt")))
            .filter_map(|i| match i.unwrap() {
                ureq::tls::PemItem::Certificate(c) => Some(c),
                _ => None,
            })
            .collect();
        let mut tls = ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .root_certs(ureq::tls::RootCerts::new_with_certs(&roots));
        if let Some(name) = cert {
            let chain = vec![ureq::tls::Certificate::from_pem(&self.read(&format!("{name}.crt"))).unwrap()];
            let key = ureq::tls::PrivateKey::from_pem(&self.read(&format!("{name}.key"))).unwrap();
            tls = tls.client_cert(Some(ureq::tls::ClientCert::new_with_certs(&chain, key)));
        }
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(20)))
            .tls_config(tls.build())
            .build()
            .into()
    }
}

/// `GET url` through `agent`: the status, or the error's text when no answer came.
fn get(agent: &ureq::Agent, url: &str, authorization: Option<&str>) -> Result<u16, String> {
    let mut req = agent.get(url);
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    req.call().map(|r| r.status().as_u16()).map_err(|e| e.to_string())
}

fn worker(dir: &Path, props: &[(&str, String)]) -> Worker {
    Worker::start(dir, &props.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>())
}

#[test]
fn an_https_listener_beside_http_serves_with_a_pkcs12_keystore() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(&dir.path().join("pki"));
    let tls_port = free_port();
    let w = worker(
        &dir.path().join("w"),
        &[
            ("listeners", format!("http://127.0.0.1:{{port}},https://127.0.0.1:{tls_port}")),
            ("ssl.keystore.location", pki.path("server.p12")),
            ("ssl.keystore.password", "ks-secret-41".to_owned()),
        ],
    );
    let url = format!("https://127.0.0.1:{tls_port}/connectors");
    assert_eq!(get(&pki.client("ca", None), &url, None), Ok(200), "a client trusting the CA");
    let (code, body) = w.get("/connectors");
    assert_eq!((code, body), (200, json!([])), "the http listener serves beside it");
    let refused = get(&pki.client("rogue", None), &url, None);
    assert!(refused.is_err(), "a client that does not trust the CA gets no answer: {refused:?}");
    // Plain HTTP to the https port gets no API answer.
    let plain: ureq::Agent =
        ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(5))).build().into();
    let answer = plain.get(format!("http://127.0.0.1:{tls_port}/connectors")).call().map(|r| r.status().as_u16());
    assert!(!matches!(answer, Ok(200)), "plain HTTP on the https port: {answer:?}");
    assert!(!w.output().contains("ks-secret-41"), "the store password reached the log");
}

#[test]
fn mutual_tls_required_and_requested_with_the_listener_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(&dir.path().join("pki"));
    let mut ports = Vec::new();
    let mut workers = Vec::new();
    for auth in ["required", "requested"] {
        let tls_port = free_port();
        // Connect's all-or-nothing rule: with listeners.https. keys, the top-level ssl.* keys
        // (here a store that does not exist) are not read.
        workers.push(worker(
            &dir.path().join(auth),
            &[
                ("listeners", format!("http://127.0.0.1:{{port}},https://127.0.0.1:{tls_port}")),
                ("ssl.keystore.location", "/nonexistent/ignored.p12".to_owned()),
                ("listeners.https.ssl.keystore.type", "PEM".to_owned()),
                ("listeners.https.ssl.keystore.location", pki.path("server.pem")),
                ("listeners.https.ssl.truststore.type", "PEM".to_owned()),
                ("listeners.https.ssl.truststore.location", pki.path("ca.crt")),
                ("listeners.https.ssl.client.auth", auth.to_owned()),
                ("listeners.https.ssl.enabled.protocols", "TLSv1.3".to_owned()),
            ],
        ));
        ports.push(tls_port);
    }
    let url = |port: u16| format!("https://127.0.0.1:{port}/connectors");
    // required: no certificate, or one from a CA the worker does not trust, is refused.
    assert!(get(&pki.client("ca", None), &url(ports[0]), None).is_err(), "required, without a client certificate");
    assert!(get(&pki.client("ca", Some("intruder")), &url(ports[0]), None).is_err(), "required, an untrusted client certificate");
    assert_eq!(get(&pki.client("ca", Some("client")), &url(ports[0]), None), Ok(200), "required, a trusted client certificate");
    // requested: a client without a certificate is let in; a bad certificate is not.
    assert_eq!(get(&pki.client("ca", None), &url(ports[1]), None), Ok(200), "requested, without a client certificate");
    assert_eq!(get(&pki.client("ca", Some("client")), &url(ports[1]), None), Ok(200), "requested, a trusted client certificate");
    assert!(get(&pki.client("ca", Some("intruder")), &url(ports[1]), None).is_err(), "requested, an untrusted client certificate");
    drop(workers);
}

#[test]
fn weak_or_unreadable_tls_settings_stop_the_worker_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(&dir.path().join("pki"));
    let base = format!("listeners=https://127.0.0.1:{}\nssl.keystore.location={}\n", free_port(), pki.path("server.pem"));
    for (extra, expect) in [
        ("ssl.enabled.protocols=TLSv1.1,TLSv1.2\n", "ssl.enabled.protocols"),
        ("ssl.cipher.suites=TLS_RSA_WITH_3DES_EDE_CBC_SHA\n", "TLS_RSA_WITH_3DES_EDE_CBC_SHA"),
        ("ssl.keystore.type=JKS\n", "keytool -importkeystore"),
        ("ssl.client.auth=required\n", "ssl.truststore.location"),
        ("ssl.client.auth=sometimes\n", "ssl.client.auth"),
    ] {
        let out = refuses_to_start(&dir.path().join(format!("w{}", expect.len())), &format!("{base}{extra}"), &[]);
        assert!(out.contains(expect), "{extra}: {out}");
    }
    let out = refuses_to_start(
        &dir.path().join("p12"),
        &format!(
            "listeners=https://127.0.0.1:{}\nssl.keystore.location={}\nssl.keystore.password=wrong-pw-93\n",
            free_port(),
            pki.path("server.p12")
        ),
        &[],
    );
    assert!(out.contains("ssl.keystore.location") && out.contains("right one"), "{out}");
    assert!(!out.contains("wrong-pw-93"), "the password is never shown: {out}");
    let out = refuses_to_start(&dir.path().join("none"), &format!("listeners=https://127.0.0.1:{}\n", free_port()), &[]);
    assert!(out.contains("ssl.keystore.location"), "{out}");
}

/// Three workers advertise their https listeners, ask for client certificates and Basic
/// credentials: a write sent to a follower reaches the leader over HTTPS with the follower's
/// certificate and the client's credentials.
#[test]
fn followers_forward_over_https_with_client_certificates_and_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(&dir.path().join("pki"));
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    std::fs::write(dir.path().join("users"), "ops=ops-pw-5c2e\n").unwrap();
    std::fs::write(
        dir.path().join("jaas.conf"),
        format!(
            "KafkaConnect {{ org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required file=\"{}\"; }};",
            dir.path().join("users").display()
        ),
    )
    .unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "").unwrap();
    let mut tls_ports = Vec::new();
    let workers: Vec<Worker> = (0..3)
        .map(|i| {
            let tls_port = free_port();
            tls_ports.push(tls_port);
            let props: Vec<(String, String)> = [
                ("listeners", format!("http://127.0.0.1:{{port}},https://127.0.0.1:{tls_port}")),
                ("rest.advertised.listener", "https".to_owned()),
                // The REST API's own keys, apart from the Kafka clients' ssl.* keys.
                ("listeners.https.ssl.keystore.type", "PKCS12".to_owned()),
                ("listeners.https.ssl.keystore.location", pki.path("server.p12")),
                ("listeners.https.ssl.keystore.password", "ks-secret-41".to_owned()),
                ("listeners.https.ssl.truststore.type", "PEM".to_owned()),
                ("listeners.https.ssl.truststore.location", pki.path("ca.crt")),
                ("listeners.https.ssl.client.auth", "required".to_owned()),
                ("rest.extension.classes", "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension".to_owned()),
                ("sluice.rest.auth.jaas.config", dir.path().join("jaas.conf").display().to_string()),
                ("bootstrap.servers", broker.bootstrap.clone()),
                ("group.id", "tls-cluster".to_owned()),
                ("config.storage.topic", "tls-configs".to_owned()),
                ("offset.storage.topic", "tls-offsets".to_owned()),
                ("status.storage.topic", "tls-status".to_owned()),
                ("session.timeout.ms", "6000".to_owned()),
                ("heartbeat.interval.ms", "1000".to_owned()),
                ("rebalance.timeout.ms", "10000".to_owned()),
                ("scheduled.rebalance.max.delay.ms", "0".to_owned()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            Worker::launch_with(
                &dir.path().join(format!("w{i}")),
                Launch::Distributed { props },
                Extras { env: Vec::new(), authorization: Some(basic_auth("ops", "ops-pw-5c2e")) },
            )
        })
        .collect();
    // Each worker advertises its https listener.
    let client = pki.client("ca", Some("client"));
    let auth = basic_auth("ops", "ops-pw-5c2e");
    for (i, port) in tls_ports.iter().enumerate() {
        let body = json!({"name": format!("src{i}"), "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "tls-lines"}});
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut resp = client
                .post(format!("https://127.0.0.1:{port}/connectors"))
                .header("authorization", &auth)
                .header("content-type", "application/json")
                .send(body.to_string())
                .expect("an answer over https");
            let code = resp.status().as_u16();
            let text = resp.body_mut().read_to_string().unwrap_or_default();
            if code == 201 {
                break;
            }
            assert!(code == 409 && Instant::now() < deadline, "create through worker {i}: {code} {text}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    for w in &workers {
        for i in 0..3 {
            w.wait_running(&format!("src{i}"), 1);
        }
    }
    let status = workers[0].get("/connectors/src0/status").1;
    let worker_id = status["connector"]["worker_id"].as_str().unwrap().to_owned();
    assert!(tls_ports.iter().any(|p| worker_id == format!("127.0.0.1:{p}")), "workers are known by their https listeners: {worker_id}");
    // Without the client's credentials the follower refuses; without a certificate the TLS
    // handshake does.
    for port in &tls_ports {
        assert_eq!(get(&client, &format!("https://127.0.0.1:{port}/connectors"), None), Ok(401));
        assert!(get(&pki.client("ca", None), &format!("https://127.0.0.1:{port}/connectors"), Some(&auth)).is_err());
    }
}
