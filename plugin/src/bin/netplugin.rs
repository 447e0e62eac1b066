//! netplugin: parses flags, sets up logging, runs [`plugin::daemon::run`] on an actix system
//! until SIGTERM or SIGINT.

use clap::Parser;
use plugin::config::{Args, EXIT_BAD_OPTIONS};

fn init_logging(level: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level.to_ascii_lowercase()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

fn main() {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if e.use_stderr() => {
            let _ = e.print();
            std::process::exit(EXIT_BAD_OPTIONS);
        }
        Err(e) => {
            let _ = e.print();
            return;
        }
    };
    let config = match args.into_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("netplugin: {e}");
            std::process::exit(EXIT_BAD_OPTIONS);
        }
    };
    init_logging(&config.log_level, config.json_log);
    let result = actix_rt::System::new().block_on(plugin::daemon::run(config, shutdown_signal()));
    if let Err(e) = result {
        tracing::error!(error = %e, "netplugin failed");
        eprintln!("netplugin: {e}");
        std::process::exit(1);
    }
}
