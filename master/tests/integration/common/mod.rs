//! Helpers: an in-process netmaster on its own thread and runtime, subprocess netmasters, and
//! polling.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use master::client::Client;
use master::daemon::{self, Config};

/// A netmaster running in this process on its own thread; stopped on drop.
pub struct InProcess {
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub fn config(etcd_url: &str, port: u16, lock_ttl_secs: u64) -> Config {
    let mut c = Config::new(etcd_url, "test", "vlan", "bridge");
    c.listen_url = format!("127.0.0.1:{port}");
    c.control_url = format!("127.0.0.1:{port}");
    c.lock_ttl = Duration::from_secs(lock_ttl_secs);
    c.service_ttl = 3;
    // Tests run side by side: each ofnet master on a port of its own.
    c.ofnet_port = 0;
    c
}

impl InProcess {
    /// Start and wait until it is the leader and has created the defaults.
    pub async fn start(etcd_url: &str, lock_ttl_secs: u64) -> InProcess {
        let port = testbed::free_port().unwrap();
        InProcess::start_with(config(etcd_url, port, lock_ttl_secs)).await
    }

    /// Start with a full configuration (several etcd endpoints, TLS files).
    pub async fn start_with(cfg: Config) -> InProcess {
        let port: u16 = cfg.listen_url.rsplit_once(':').unwrap().1.parse().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(daemon::run(cfg, async {
                let _ = rx.await;
            }))
            .unwrap();
        });
        let url = format!("http://127.0.0.1:{port}");
        let me = InProcess {
            url: url.clone(),
            stop: Some(tx),
            thread: Some(thread),
        };
        wait_ready(&url, Duration::from_secs(20)).await;
        me
    }

    pub fn client(&self) -> Client {
        Client::new(&self.url).unwrap()
    }

    /// Stop and wait for the thread to end.
    pub fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Poll until netmaster at `url` is leader and the `default` tenant exists.
pub async fn wait_ready(url: &str, timeout: Duration) {
    let client = Client::new(url).unwrap();
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(info) = client.info().await
            && info["current-state"] == "leader"
            && client.get::<master::model::Tenant>("default").await.is_ok()
            && client.get::<master::model::Global>("global").await.is_ok()
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "netmaster at {url} not ready within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A netmaster subprocess (the real binary); killed on drop.
pub struct Subprocess {
    pub url: String,
    pub addr: String,
    pub child: Child,
}

impl Subprocess {
    pub fn spawn(etcd_url: &str, lock_ttl_secs: u64) -> Subprocess {
        let port = testbed::free_port().unwrap();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(env!("CARGO_BIN_EXE_netmaster"))
            .args(["--mode", "test", "--netmode", "vlan", "--fwdmode", "bridge"])
            .args([
                "--etcd",
                etcd_url,
                "--listen-url",
                &addr,
                "--control-url",
                &addr,
            ])
            .args(["--lock-ttl", &lock_ttl_secs.to_string()])
            .args(["--ofnet-port", "0"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn netmaster");
        Subprocess {
            url: format!("http://{addr}"),
            addr,
            child,
        }
    }

    pub fn client(&self) -> Client {
        Client::new(&self.url).unwrap()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Subprocess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Poll `f` until it returns `Some`, or panic after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn network(tenant: &str, name: &str, subnet: &str) -> master::model::Network {
    master::model::Network {
        network_name: name.into(),
        tenant_name: tenant.into(),
        encap: "vxlan".into(),
        subnet: subnet.into(),
        ..Default::default()
    }
}

pub fn endpoint_request(network: &str, container: &str) -> master::endpoint::CreateEndpointRequest {
    master::endpoint::CreateEndpointRequest {
        TenantName: "default".into(),
        NetworkName: network.into(),
        EndpointID: container.into(),
        ConfigEP: master::endpoint::ConfigEp {
            Container: container.into(),
            Host: "host1".into(),
            ..Default::default()
        },
        ..Default::default()
    }
}
