//! etcd stopped: requests answer 503 (not hang, not 500); once etcd is back netmaster recovers by
//! itself and nothing is lost.

use std::time::{Duration, Instant};

use master::model::{Network, Tenant};

use crate::common::*;

#[tokio::test]
async fn etcd_outage_gives_503_then_recovers() {
    testbed::require!(Etcd);
    let mut etcd = testbed::Etcd::start().unwrap();
    let nm = InProcess::start(&etcd.client_url(), 3).await;
    let c = nm.client();
    c.post(&network("default", "n1", "10.1.1.0/24"))
        .await
        .unwrap();
    c.create_endpoint(&endpoint_request("n1", "c1"))
        .await
        .unwrap();

    etcd.stop();
    let started = Instant::now();
    let err = c.post(&Tenant::named("during-outage")).await.unwrap_err();
    assert_eq!(err.status(), Some(503), "{err}");
    let err = c.get::<Network>("default:n1").await.unwrap_err();
    assert_eq!(err.status(), Some(503), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "outage errors took {:?}",
        started.elapsed()
    );

    etcd.start_again().unwrap();
    eventually("writes accepted again", Duration::from_secs(30), || async {
        c.post(&Tenant::named("after-outage")).await.ok()
    })
    .await;
    assert_eq!(
        c.get::<Network>("default:n1").await.unwrap().subnet,
        "10.1.1.0/24"
    );
    assert_eq!(
        c.create_endpoint(&endpoint_request("n1", "c2"))
            .await
            .unwrap()
            .ip_address,
        "10.1.1.2"
    );
    assert!(c.get::<Tenant>("during-outage").await.is_err());
}
