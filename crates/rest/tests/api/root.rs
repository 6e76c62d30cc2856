use crate::support::{app, golden};

#[tokio::test]
async fn server_info() {
    let app = app();
    let r = app.get("/").await;
    assert_eq!(r.status, 200);
    r.assert_json_content_type();
    golden("root", &r.json);
}

#[tokio::test]
async fn health_follows_readiness() {
    let app = app();
    let r = app.get("/health").await;
    assert_eq!(r.status, 200);
    golden("health_ready", &r.json);

    app.herder.set_ready(false);
    let r = app.get("/health").await;
    assert_eq!(r.status, 503);
    golden("health_starting", &r.json);
}

#[tokio::test]
async fn health_is_500_when_the_herder_does_not_answer_its_probe() {
    let app = app();
    app.herder.set_stuck(true);
    let r = app.get("/health").await;
    assert_eq!(r.status, 500);
    golden("health_unhealthy", &r.json);
    // Starting wins over stuck, as in Connect (the probe runs only once ready).
    app.herder.set_ready(false);
    assert_eq!(app.get("/health").await.status, 503);
}
