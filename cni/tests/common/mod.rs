//! Test helpers: a stand-in for netplugin's CNI socket (only for testing the executable
//! itself), and running the built `contivk8s`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::Value;

/// One request the fake server received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub content_type: Option<String>,
    pub body: Value,
}

type Responder = dyn Fn(&str, &Value) -> (u16, Value) + Send + Sync;

/// A fake netplugin answering `POST /ContivCNI.*` on a unix socket in a temp dir.
pub struct FakeNetplugin {
    dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Seen>>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeNetplugin {
    pub fn start(respond: impl Fn(&str, &Value) -> (u16, Value) + Send + Sync + 'static) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("contiv-cni.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let respond: Arc<Responder> = Arc::new(respond);
        let thread = {
            let (stop, seen) = (stop.clone(), seen.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        serve(conn, &seen, &*respond);
                    }
                }
            })
        };
        FakeNetplugin {
            dir,
            stop,
            seen,
            thread: Some(thread),
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("contiv-cni.sock")
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for FakeNetplugin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = UnixStream::connect(self.socket());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(conn: UnixStream, seen: &Mutex<Vec<Seen>>, respond: &Responder) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let mut length = 0;
    let mut content_type = None;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap(),
            "content-type" => content_type = Some(value.trim().to_string()),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (status, reply) = respond(&path, &body);
    seen.lock().unwrap().push(Seen {
        path,
        content_type,
        body,
    });
    let text = reply.to_string();
    let mut conn = conn;
    let _ = write!(
        conn,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
        text.len()
    );
}

/// A successful AddPod reply.
pub fn add_reply() -> Value {
    serde_json::json!({
        "result": 0, "endpointid": "cid-1", "ipaddress": "10.1.1.2/24", "gateway": "10.1.1.1",
        "ipv6address": "fd00:1::2/64", "ipv6gateway": "fd00:1::1",
        "mac": "02:02:0a:01:01:02", "hostIfname": "vvport1"
    })
}

/// What a run of the executable produced.
pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub json: Option<Value>,
}

/// Run `contivk8s` with these variables (others cleared) and `stdin`.
pub fn contivk8s(vars: &[(&str, &str)], stdin: &str) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_contivk8s"));
    cmd.env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    Run {
        status: out.status.code().unwrap_or(-1),
        json: serde_json::from_str(&stdout).ok(),
        stdout,
    }
}

/// The directory holding the built `contivk8s` (a CNI_PATH entry).
pub fn plugin_dir() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_contivk8s")).parent().unwrap()
}
