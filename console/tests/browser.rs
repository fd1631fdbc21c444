//! The console in a real browser: Debian's Chromium, headless, driven through ChromeDriver
//! (WebDriver) by fantoccini, against consoles talking to a TLS control plane with
//! authorization on, on the real stack. An admin's console lists the namespace, shows the dead
//! letter the test made (linked to its write's trace), redrives it after a confirmation that shows the dry run, and the row
//! arrives in Cassandra; it lists the namespace's open transactions and aborts one after asking
//! why; it pauses and resumes the namespace's delivery (its destination's row showing the
//! pause) and cancels an entry by its id. A console with the identity of a principal without
//! `admin` shows the page read-only, and the control plane refuses its redrive.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use tokio::net::TcpListener;
use wal_namespaces::Backend;
use wal_namespaces::feed::ClientTls;
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;
use wal_proto::v1::operations_client::OperationsClient;
use wal_proto::v1::transactions_client::TransactionsClient;
use wal_proto::v1::{
    AppendItemsRequest, ApplyRequest, AuditRequest, GetRedriveRequest, ListDeadLettersRequest,
    TransactionItem,
};
use wal_runtime::authorize::Authorizer;
use wal_runtime::tls::ServerTls;
use wal_testkit::pki::{Named, Pki, tls_channel};
use wal_testkit::{Cql, KEYSPACE, TestProducer, control_plane_serving, cql_target, eventually};
use wal_testkit::{namespace_json, put, start_consumer, unique, with_durable_storage, write_true};

/// Where Debian's packages put them (`scripts/stack browser` installs both).
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The transactions the setup leaves open.
const OPEN: [&str; 2] = ["stuck-1", "stuck-2"];
/// How long the page may take to show what the test waits for.
const PAGE_WAIT: Duration = Duration::from_secs(30);

/// Headless Chromium under ChromeDriver; both end with it, and its profile is removed.
struct Browser {
    client: Client,
    _driver: Driver,
    profile: PathBuf,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// ChromeDriver in a process group of its own, killed with every Chromium process it started
/// when dropped: a test that fails halfway closes no session, and Chromium's processes would
/// outlive it, holding the test's output open.
struct Driver(std::process::Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &group])
            .status();
        let _ = self.0.wait();
    }
}

async fn browser() -> Browser {
    let port = free_port().await;
    let driver = std::process::Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .spawn()
        .map(Driver)
        .unwrap_or_else(|e| panic!("{CHROMEDRIVER} (scripts/stack browser installs it): {e}"));
    let profile = std::env::temp_dir().join(unique("chromium-profile"));
    // As the machine notes say: without the background-networking flags Chromium keeps trying
    // Google's hosts, which a closed network refuses; as root it needs --no-sandbox.
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        &format!("--user-data-dir={}", profile.display()),
    ];
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({"binary": CHROMIUM, "args": args}),
    );
    let url = format!("http://127.0.0.1:{port}");
    let client = eventually(Duration::from_secs(20), "ChromeDriver's session", || {
        let (url, capabilities) = (url.clone(), capabilities.clone());
        async move {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            ClientBuilder::new(connector)
                .capabilities(capabilities)
                .connect(&url)
                .await
                .ok()
        }
    })
    .await;
    Browser {
        client,
        _driver: driver,
        profile,
    }
}

async fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// A console on a free port, presenting `principal`'s client certificate to the control plane
/// at `address`; its URL.
async fn console(pki: &Pki, address: std::net::SocketAddr, principal: &str) -> String {
    let client = pki.client(Named::Cn(principal));
    let (cert, key) = (
        pki.dir.join(format!("{principal}.pem")),
        pki.dir.join(format!("{principal}.key")),
    );
    std::fs::write(&cert, &client.cert).unwrap();
    std::fs::write(&key, &client.key).unwrap();
    let tls = ClientTls {
        ca: pki.ca_path(),
        cert: Some(cert),
        key: Some(key),
    };
    let control_plane = format!("https://localhost:{}", address.port());
    let traces = wal_console::TraceLinks::new(Some(TRACES)).unwrap();
    serve_console(
        wal_console::ControlPlane::new(&control_plane, Some(&tls)).unwrap(),
        traces,
    )
    .await
}

/// A console on a free port for `control_plane`; its URL.
async fn serve_console(
    control_plane: wal_console::ControlPlane,
    traces: wal_console::TraceLinks,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let settings = wal_console::Settings {
        traces,
        ..Default::default()
    };
    tokio::spawn(async move {
        wal_console::serve(listener, control_plane, settings, std::future::pending()).await
    });
    url
}

/// The text of the element `css` once it holds `expected`.
async fn text_holding(client: &Client, css: &str, expected: &str) -> String {
    let waited = tokio::time::timeout(PAGE_WAIT, async {
        loop {
            if let Ok(element) = client.find(Locator::Css(css)).await
                && let Ok(text) = element.text().await
                && text.contains(expected)
            {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    match waited.await {
        Ok(text) => text,
        Err(_) => {
            let page = client.source().await.unwrap_or_default();
            panic!("{css} never held {expected:?} within {PAGE_WAIT:?}; the page:\n{page}")
        }
    }
}

/// Where the consoles link a trace, and the trace of the write the test dead-letters.
const TRACES: &str = "http://traces.invalid/trace/{trace_id}";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The control plane (TLS, authorization on), a namespace whose one write was dead-lettered
/// (its table did not exist yet; it does now), and what serves it.
struct Setup {
    pki: Pki,
    address: std::net::SocketAddr,
    name: String,
    table: String,
    id: String,
    producer: TestProducer,
    consumer: wal_testkit::ConsumerHandle,
}

impl Setup {
    fn operations(&self, principal: &str) -> OperationsClient<tonic::transport::Channel> {
        let client = self.pki.client(Named::Cn(principal));
        OperationsClient::new(tls_channel(self.address, &self.pki.ca_pem(), Some(&client)))
    }
}

async fn setup() -> Setup {
    let pki = Pki::new("wal console test CA");
    let tls = ServerTls::load(&pki.server_flags("control-plane", "DEFAULT")).unwrap();
    let address = control_plane_serving(tls, Authorizer::on(vec!["root".into()])).await;
    let root = tls_channel(address, &pki.ca_pem(), Some(&pki.client(Named::Cn("root"))));
    let table = unique("console").replace('-', "_");
    let access = r#""access": {"admin": ["alice"], "write": ["svc"]}"#;
    let config = with_durable_storage(
        &namespace_json(Backend::Kafka, 1, &cql_target(&table), access),
        "wal_console_test",
    );
    let namespace = wal_namespaces::parse(&config, "test").unwrap();
    let name = namespace.name.clone();
    NamespaceRegistryClient::new(root)
        .apply(ApplyRequest {
            config_json: config,
            author: "root".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace]).await;
    let payload = put("o-1", "paid");
    // Its caller's trace context rides with it (the producer exports no spans here, so the
    // entry keeps the caller's): the console links its dead letter to that trace.
    let mut traced = tonic::Request::new(wal_testkit::write(&name, &payload));
    let parent = format!("00-{TRACE_ID}-00f067aa0ba902b7-01");
    traced
        .metadata_mut()
        .insert("traceparent", parent.parse().unwrap());
    let id = write_true(&producer.client, traced).await;
    // Two transactions left open by their client: alice aborts one, bob sees the other.
    for open in OPEN {
        TransactionsClient::new(producer.channel.clone())
            .append_items(AppendItemsRequest {
                namespace: name.clone(),
                transaction_id: open.to_owned(),
                items: vec![TransactionItem {
                    sequence: 0,
                    target: None,
                    payload: put("o-2", "reserved"),
                }],
            })
            .await
            .unwrap();
    }
    let setup = Setup {
        pki,
        address,
        name,
        table,
        id,
        producer,
        consumer,
    };
    let alice = setup.operations("alice");
    eventually(Duration::from_secs(60), "the write dead-lettered", || {
        let (mut alice, namespace) = (alice.clone(), setup.name.clone());
        async move {
            let request = ListDeadLettersRequest {
                namespace,
                ..Default::default()
            };
            let listed = alice.list_dead_letters(request).await.ok()?.into_inner();
            (listed.total == 1).then_some(())
        }
    })
    .await;
    let create = format!(
        "CREATE TABLE {KEYSPACE}.{} (id text PRIMARY KEY, value text)",
        setup.table
    );
    Cql::connect()
        .await
        .session
        .query_unpaged(create, &[])
        .await
        .unwrap();
    setup
}

async fn click(page: &Client, locator: Locator<'_>) {
    page.find(locator).await.unwrap().click().await.unwrap();
}

/// Alice, an admin: the list, the namespace's page with its dead letter and payload, and the
/// redrive: its dry run first, nothing moved before the confirmation, then the row in
/// Cassandra.
async fn alice_redrives(setup: &Setup, page: &Client) {
    let (name, id) = (&setup.name, &setup.id);
    let as_alice = console(&setup.pki, setup.address, "alice").await;
    page.goto(&format!("{as_alice}/")).await.unwrap();
    text_holding(page, "#namespaces", name).await;
    click(page, Locator::LinkText(name)).await;
    text_holding(page, "#access", "admin (alice)").await;
    text_holding(page, "#consumers", "no consumer metrics given").await;
    text_holding(page, "#dead-letters", id).await;
    text_holding(page, "#dead-letter-total", "1 dead letter").await;
    let trace = page
        .find(Locator::Css(&format!("tr[data-entry='{id}'] a.trace")))
        .await
        .unwrap();
    let link = trace.attr("href").await.unwrap();
    assert_eq!(
        link.as_deref(),
        Some(TRACES.replace("{trace_id}", TRACE_ID).as_str())
    );
    click(page, Locator::Css(&format!("button[data-id='{id}']"))).await;
    text_holding(page, "#payload", r#""id":"o-1""#).await;
    click(page, Locator::Id("redrive")).await;
    text_holding(page, "#dry-run", "found 1 dead letter to redrive").await;
    // The dry run started nothing: no redrive on record yet.
    let mut alice = setup.operations("alice");
    let asked = GetRedriveRequest {
        namespace: name.clone(),
    };
    let before = alice.get_redrive(asked).await.unwrap_err();
    assert_eq!(
        before.code(),
        tonic::Code::NotFound,
        "redriven before it was confirmed"
    );
    click(page, Locator::Id("confirm")).await;
    text_holding(page, "#redrive-state", "last redrive: done").await;
    let cql = Cql::connect().await;
    eventually(
        Duration::from_secs(60),
        "the redriven row in Cassandra",
        || async {
            let rows = cql.rows(&setup.table).await;
            (rows.get("o-1") == Some(&Some("paid".to_owned()))).then_some(())
        },
    )
    .await;
}

/// Alice again: the namespace's open transactions, and one aborted after she says why; the
/// reason is kept on it.
async fn alice_aborts(setup: &Setup, page: &Client) {
    let name = &setup.name;
    let as_alice = console(&setup.pki, setup.address, "alice").await;
    page.goto(&format!("{as_alice}/#/ns/{name}")).await.unwrap();
    text_holding(page, "#transaction-counts", "2 open").await;
    click(page, Locator::Css("button.abort[data-id='stuck-1']")).await;
    type_into(page, "abort-reason", "client gave up").await;
    click(page, Locator::Id("confirm-abort")).await;
    text_holding(page, "#abort-result", "aborted transaction 'stuck-1'").await;
    text_holding(page, "#transaction-counts", "1 open").await;
    let shown = setup
        .operations("alice")
        .show_transaction(wal_proto::v1::ShowTransactionRequest {
            namespace: name.clone(),
            transaction_id: "stuck-1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(shown.state, "aborted", "{shown:?}");
    assert!(shown.reason.ends_with(": client gave up"), "{shown:?}");
}

/// Alice pauses the namespace's delivery, resumes it, and cancels an entry by its id; each is
/// in the control plane's record as hers.
async fn alice_pauses_resumes_and_cancels(setup: &Setup, page: &Client) {
    let name = &setup.name;
    let mut alice = setup.operations("alice");
    type_into(page, "pause-reason", "incident 7").await;
    click(page, Locator::Id("pause")).await;
    text_holding(page, "#delivery-result", "paused every destination").await;
    text_holding(page, "#pauses", "all by alice").await;
    // The namespace's own target, read from the brokers, held by the pause.
    let state = "#destinations tr[data-destination='default'] td.state";
    let paused = text_holding(page, state, "paused by alice").await;
    assert!(paused.ends_with(": incident 7"), "{paused}");
    let pauses = alice
        .list_pauses(wal_proto::v1::ListPausesRequest {
            namespace: name.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .pauses;
    assert_eq!(pauses.len(), 1, "{pauses:?}");
    assert_eq!(pauses[0].reason, "incident 7");
    click(page, Locator::Css("button.resume[data-destination='']")).await;
    text_holding(page, "#delivery-result", "resumed every destination").await;
    text_holding(page, "#pauses", "nothing is paused").await;
    let resumed = page.find(Locator::Css(state)).await.unwrap();
    let resumed = resumed.text().await.unwrap();
    let reader_states = ["caught up", "behind", "not started"];
    assert!(reader_states.contains(&resumed.as_str()), "{resumed}");

    type_into(page, "cancel-id", "late-entry").await;
    type_into(page, "cancel-reason", "customer kept it").await;
    click(page, Locator::Id("cancel")).await;
    text_holding(page, "#delivery-result", "entry 'late-entry' is cancelled").await;
    let cancellations = alice
        .list_cancellations(wal_proto::v1::ListCancellationsRequest {
            namespace: name.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .cancellations;
    let by: Vec<(&str, &str)> = cancellations
        .iter()
        .map(|c| (c.entry_id.as_str(), c.cancelled_by.as_str()))
        .collect();
    assert_eq!(by, [("late-entry", r#"alice (as "wal-console")"#)]);
}

async fn type_into(page: &Client, id: &str, text: &str) {
    page.find(Locator::Id(id))
        .await
        .unwrap()
        .send_keys(text)
        .await
        .unwrap();
}

/// Bob, no admin: the page is read-only, a redrive asked through his console anyway is refused
/// by the control plane in its words, and the page shows an error in its error box.
async fn bob_is_read_only(setup: &Setup, page: &Client) {
    let name = &setup.name;
    let as_bob = console(&setup.pki, setup.address, "bob").await;
    page.goto(&format!("{as_bob}/#/ns/{name}")).await.unwrap();
    text_holding(page, "#access", "read-only: bob lacks access.admin").await;
    let redrive = page.find(Locator::Id("redrive")).await.unwrap();
    assert!(
        !redrive.is_enabled().await.unwrap(),
        "bob may press redrive"
    );
    text_holding(page, "#transaction-counts", "1 open").await;
    let abort = page
        .find(Locator::Css("button.abort[data-id='stuck-2']"))
        .await
        .unwrap();
    assert!(!abort.is_enabled().await.unwrap(), "bob may press abort");
    for id in ["pause", "cancel"] {
        let button = page.find(Locator::Id(id)).await.unwrap();
        assert!(!button.is_enabled().await.unwrap(), "bob may press {id}");
    }
    let script = format!(
        "return fetch('/api/namespaces/{name}/redrive', {{method: 'POST', \
         headers: {{'content-type': 'application/json'}}, body: '{{}}'}}) \
         .then(async (r) => [r.status, (await r.json()).error]);"
    );
    let answer = page.execute(&script, vec![]).await.unwrap();
    assert_eq!(answer[0], 403, "{answer}");
    let refusal = answer[1].as_str().unwrap_or_default();
    assert!(
        refusal.contains("\"bob\"") && refusal.contains("admin"),
        "{refusal}"
    );
    page.goto(&format!("{as_bob}/#/ns/no-such-namespace"))
        .await
        .unwrap();
    text_holding(page, "#error", "NotFound").await;

    let audit = setup
        .operations("alice")
        .audit(AuditRequest {
            namespace: name.clone(),
            limit: 10,
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    let redrives: Vec<(&str, bool)> = audit
        .iter()
        .filter(|r| r.verb == "redrive")
        .map(|r| (r.actor.as_str(), r.result.starts_with("refused")))
        .collect();
    let refused = ("bob (as \"wal-console\")", true);
    assert!(redrives.contains(&refused), "{redrives:?}");
    let by_alice = |(actor, refused): &(&str, bool)| actor.starts_with("alice") && !refused;
    assert!(redrives.iter().any(by_alice), "{redrives:?}");
}

/// A request as another web page would make it through the operator's browser: naming another
/// host (DNS rebinding) or coming from another origin. The status line of the answer.
async fn forged(console: &str, host: &str, origin: Option<&str>) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let address = console.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (method, body) = match origin {
        Some(_) => ("POST", "{}"),
        None => ("GET", ""),
    };
    let origin = origin
        .map(|o| format!("Origin: {o}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "{method} /api/namespaces HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_operates_a_namespace_in_the_browser_and_a_reader_is_refused() {
    let setup = setup().await;
    let browser = browser().await;
    alice_redrives(&setup, &browser.client).await;
    alice_aborts(&setup, &browser.client).await;
    alice_pauses_resumes_and_cancels(&setup, &browser.client).await;
    bob_is_read_only(&setup, &browser.client).await;
    browser.client.clone().close().await.unwrap();
    setup.consumer.shutdown().await;
    let mut producer = setup.producer;
    producer.shutdown().await;
}

#[tokio::test]
async fn a_request_from_another_site_is_refused() {
    let address = control_plane_serving(None, Authorizer::off()).await;
    let control_plane = wal_console::ControlPlane::new(&format!("http://{address}"), None);
    let console = serve_console(control_plane.unwrap(), Default::default()).await;
    let port = console.rsplit(':').next().unwrap().to_owned();
    assert!(
        forged(&console, &format!("127.0.0.1:{port}"), None)
            .await
            .contains(" 200 ")
    );
    assert!(
        forged(&console, &format!("localhost:{port}"), None)
            .await
            .contains(" 200 ")
    );
    let rebound = forged(&console, &format!("evil.example:{port}"), None).await;
    assert!(rebound.contains(" 403 "), "{rebound}");
    let cross = forged(
        &console,
        &format!("127.0.0.1:{port}"),
        Some("http://evil.example"),
    )
    .await;
    assert!(cross.contains(" 403 "), "{cross}");
}
