//! `contivk8s` driven through libcni, the library containerd and CRI-O use, exactly as a
//! runtime calls it: a conflist, CNI_PATH, and libcni's own exec, result parsing and version
//! conversion. netplugin is the fake socket server of `common`.
//!
//! Two drivers: the project's `cnirun` (shared/tools/cnirun, `CNIRUN` in CI) for what a
//! runtime prints, and `libcni-probe` (tests/libcni-probe) which also reports the CNI error
//! code libcni decoded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{FakeNetplugin, add_reply, plugin_dir};
use serde_json::{Value, json};

/// Go and libcni's sources (Debian packages) are needed to build the drivers.
fn go_missing() -> Option<String> {
    let have_go = Command::new("go").arg("version").output().is_ok();
    let have_libcni =
        Path::new("/usr/share/gocode/src/github.com/containernetworking/cni/libcni").is_dir();
    (!have_go || !have_libcni).then(|| {
        "needs go and libcni sources (apt-get install golang-go golang-github-appc-cni-dev)"
            .to_string()
    })
}

fn tmp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Build the probe (offline, from Debian's Go sources); concurrent builders each write their
/// own file and rename it into place.
fn probe() -> PathBuf {
    let dir = tmp_dir("libcni-probe");
    let exe = dir.join("libcni-probe");
    if exe.exists() {
        return exe;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/libcni-probe");
    let tmp = dir.join(format!("build-{}", std::process::id()));
    let out = Command::new("go")
        .args(["build", "-o"])
        .arg(&tmp)
        .arg(".")
        .current_dir(&src)
        .env("GOPATH", "/usr/share/gocode")
        .env("GO111MODULE", "off")
        .env("GOCACHE", dir.join("gocache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&tmp, &exe).unwrap();
    exe
}

/// `cnirun`: `$CNIRUN`, or built with shared/tools/cnirun/build.sh.
fn cnirun() -> PathBuf {
    if let Some(path) = std::env::var_os("CNIRUN") {
        return PathBuf::from(path);
    }
    let dir = tmp_dir("cnirun");
    let exe = dir.join("cnirun");
    if !exe.exists() {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/tools/cnirun/build.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "build.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    exe
}

fn conflist(dir: &Path, version: &str, plugin: Value) -> PathBuf {
    let path = dir.join("contiv.conflist");
    let list = json!({"cniVersion": version, "name": "contiv-net", "plugins": [plugin]});
    std::fs::write(&path, list.to_string()).unwrap();
    path
}

fn probe_run(args: &[&str]) -> Value {
    let out = Command::new(probe())
        .args(args)
        .env("CNI_PATH", plugin_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn libcni_sees_versions_results_and_error_codes() {
    if let Some(why) = go_missing()
        && testbed::require::skip_or_fail(module_path!(), &why)
    {
        return;
    }
    let version = probe_run(&["version", "contivk8s"]);
    assert_eq!(version["ok"], true, "{version}");
    let supported = version["supportedVersions"].as_array().unwrap();
    for v in ["0.3.1", "0.4.0", "1.0.0"] {
        assert!(supported.contains(&json!(v)), "{version}");
    }

    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let cache = cache.to_str().unwrap();
    let fake = FakeNetplugin::start(|_, _| (200, add_reply()));
    let conf = conflist(
        work.path(),
        "1.0.0",
        json!({"type": "contivk8s", "socketPath": fake.socket()}),
    );
    let conf = conf.to_str().unwrap();
    let add = probe_run(&[
        "add",
        conf,
        "cid-probe",
        "/var/run/netns/probe",
        "eth0",
        cache,
    ]);
    assert_eq!(add["ok"], true, "{add}");
    assert_eq!(add["result"]["ips"][0]["address"], "10.1.1.2/24");
    assert_eq!(
        add["result"]["interfaces"][1]["sandbox"],
        "/var/run/netns/probe"
    );
    let check = probe_run(&[
        "check",
        conf,
        "cid-probe",
        "/var/run/netns/probe",
        "eth0",
        cache,
    ]);
    assert_eq!(check["ok"], true, "{check}");
    let del = probe_run(&[
        "del",
        conf,
        "cid-probe",
        "/var/run/netns/probe",
        "eth0",
        cache,
    ]);
    assert_eq!(del["ok"], true, "{del}");
    let seen: Vec<String> = fake.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(
        seen,
        vec![
            "/ContivCNI.AddPod",
            "/ContivCNI.CheckPod",
            "/ContivCNI.DelPod"
        ]
    );
    let check_body = &fake.seen()[1].body;
    assert_eq!(
        check_body["prevResult"]["ips"][0]["address"], "10.1.1.2/24",
        "libcni passed ADD's cached result back on CHECK"
    );

    // netplugin down: code 11 and the socket in the message.
    let absent = work.path().join("absent.sock");
    let conf_down = conflist(
        work.path(),
        "1.0.0",
        json!({"type": "contivk8s", "socketPath": absent}),
    );
    let down = probe_run(&[
        "add",
        conf_down.to_str().unwrap(),
        "cid-down",
        "/var/run/netns/probe",
        "eth0",
        cache,
    ]);
    assert_eq!(down["ok"], false);
    assert_eq!(down["code"], 11, "{down}");
    assert!(
        down["msg"]
            .as_str()
            .unwrap()
            .contains(absent.to_str().unwrap())
    );

    // A config libcni accepts but we cannot use: code 7 naming the field.
    let conf_bad = conflist(
        work.path(),
        "1.0.0",
        json!({"type": "contivk8s", "socketPath": {"not": "a path"}}),
    );
    let bad = probe_run(&[
        "add",
        conf_bad.to_str().unwrap(),
        "cid-bad",
        "/var/run/netns/probe",
        "eth0",
        cache,
    ]);
    assert_eq!(bad["code"], 7, "{bad}");
    assert!(bad["msg"].as_str().unwrap().contains("socketPath"), "{bad}");
}

#[test]
fn cnirun_adds_and_deletes_like_a_runtime() {
    testbed::require!(Root);
    if let Some(why) = go_missing()
        && testbed::require::skip_or_fail(module_path!(), &why)
    {
        return;
    }
    let cnirun = cnirun();
    let work = tempfile::tempdir().unwrap();
    let fake = FakeNetplugin::start(|_, _| (200, add_reply()));
    let run = |conf: &Path, cmd: &str, cid: &str| {
        Command::new(&cnirun)
            .args([
                cmd,
                conf.to_str().unwrap(),
                cid,
                "/var/run/netns/cnirun-test",
            ])
            .env("CNI_PATH", plugin_dir())
            .env("POD_NS", "default")
            .env("POD_NAME", "web-1")
            .output()
            .unwrap()
    };
    let cid = format!("contivk8s-test-{}", std::process::id());
    let conf = conflist(
        work.path(),
        "0.3.1",
        json!({"type": "contivk8s", "socketPath": fake.socket()}),
    );
    let out = run(&conf, "add", &cid);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["cniVersion"], "0.3.1");
    assert_eq!(result["ips"][0]["address"], "10.1.1.2/24");
    assert_eq!(result["ips"][0]["gateway"], "10.1.1.1");
    let add_body = &fake.seen()[0].body;
    assert_eq!(add_body["K8S_POD_NAME"], "web-1");
    assert_eq!(add_body["K8S_POD_INFRA_CONTAINER_ID"], cid.as_str());
    let out = run(&conf, "del", &cid);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // netplugin down: the runtime's error names the socket.
    let absent = work.path().join("absent.sock");
    let conf_down = conflist(
        work.path(),
        "1.0.0",
        json!({"type": "contivk8s", "socketPath": absent}),
    );
    let out = run(&conf_down, "add", &format!("{cid}-down"));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("netplugin is not running"), "{stderr}");
    assert!(stderr.contains(absent.to_str().unwrap()), "{stderr}");

    // Malformed config: the field is named.
    let conf_bad = conflist(
        work.path(),
        "1.0.0",
        json!({"type": "contivk8s", "socketPath": 42}),
    );
    let out = run(&conf_bad, "add", &format!("{cid}-bad"));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("socketPath"), "{stderr}");
}
