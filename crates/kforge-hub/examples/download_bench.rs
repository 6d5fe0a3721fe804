//! Download throughput of the hub's `resolve` endpoint on loopback, with 1 and 16 clients, against nginx
//! serving the same file from disk (when `--nginx PATH` is given). Prints one JSON object per measurement.
//!
//! cargo run --release -p kforge-hub --example download_bench -- --size-mib 256 --seconds 5 --nginx /usr/sbin/nginx

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kforge_hub::model::{CommitRequest, Op, RepoKey, RepoType};
use kforge_hub::server::{Hub, HubConfig, router};

struct Args {
    size_mib: u64,
    seconds: u64,
    clients: Vec<usize>,
    nginx: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        size_mib: 256,
        seconds: 5,
        clients: vec![1, 16],
        nginx: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |e: std::num::ParseIntError| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--size-mib" => args.size_mib = value.parse().map_err(bad)?,
            "--seconds" => args.seconds = value.parse().map_err(bad)?,
            "--clients" => {
                args.clients = value
                    .split(',')
                    .map(|c| c.parse().map_err(bad))
                    .collect::<Result<_, _>>()?
            }
            "--nginx" => args.nginx = Some(value),
            other => {
                return Err(format!(
                    "unknown option {other}; see the header of this file"
                ));
            }
        }
    }
    Ok(args)
}

/// GET `url` repeatedly from `clients` threads for `seconds`; returns (bytes/s, requests).
fn measure(url: &str, clients: usize, seconds: u64, expect: u64) -> (f64, u64) {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let url = url.to_owned();
            std::thread::spawn(move || {
                let agent = ureq::Agent::config_builder().build().new_agent();
                let mut buf = vec![0u8; 1 << 20];
                let (mut bytes, mut requests) = (0u64, 0u64);
                while Instant::now() < deadline {
                    let resp = agent.get(&url).call().expect("GET failed");
                    let mut reader = resp.into_body().into_reader();
                    let mut got = 0u64;
                    loop {
                        let n = reader.read(&mut buf).expect("read failed");
                        if n == 0 {
                            break;
                        }
                        got += n as u64;
                    }
                    assert_eq!(got, expect, "short body from {url}");
                    bytes += got;
                    requests += 1;
                }
                (bytes, requests)
            })
        })
        .collect();
    let (mut bytes, mut requests) = (0, 0);
    for h in handles {
        let (b, r) = h.join().expect("client thread");
        bytes += b;
        requests += r;
    }
    (bytes as f64 / start.elapsed().as_secs_f64(), requests)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

// The child is returned to `main`, which stops and waits for it.
#[allow(clippy::zombie_processes)]
fn start_nginx(bin: &str, root: &Path, www: &Path) -> (Child, String) {
    let port = free_port();
    let conf = root.join("nginx.conf");
    // One worker per core, sendfile: nginx's usual static-file setup.
    std::fs::write(
        &conf,
        format!(
            "worker_processes auto; pid {pid}; error_log {err} warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{ access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000;\n\
               client_body_temp_path {tmp}; proxy_temp_path {tmp}; fastcgi_temp_path {tmp};\n\
               uwsgi_temp_path {tmp}; scgi_temp_path {tmp};\n\
               server {{ listen 127.0.0.1:{port}; root {www}; }} }}\n",
            pid = root.join("nginx.pid").display(),
            err = root.join("nginx.err").display(),
            tmp = root.display(),
            www = www.display(),
        ),
    )
    .expect("writing nginx.conf");
    let mut child = Command::new(bin)
        .args(["-p"])
        .arg(root)
        .arg("-c")
        .arg(&conf)
        .args(["-g", "daemon off;"])
        .spawn()
        .expect("starting nginx");
    let url = format!("http://127.0.0.1:{port}/file.bin");
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (child, url);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!(
        "nginx did not start; see {}",
        root.join("nginx.err").display()
    );
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let size = args.size_mib << 20;
    let content: Vec<u8> = (0..size)
        .map(|i| ((i * 2_654_435_761) >> 13) as u8)
        .collect();
    let www = dir.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("file.bin"), &content).unwrap();

    let hub = Arc::new(
        Hub::open(&dir.path().join("hub"), HubConfig::default()).expect("opening the hub"),
    );
    let key = RepoKey {
        repo_type: RepoType::Kernel,
        namespace: "bench".into(),
        name: "blob".into(),
    };
    let repo = hub.meta.create_repo(&key, false, "bench").unwrap();
    let blob = hub.blobs.put(&mut &content[..], size, None).unwrap();
    drop(content);
    hub.meta
        .commit(
            &repo,
            &CommitRequest {
                branch: "main".into(),
                parent: None,
                title: "bench".into(),
                message: String::new(),
                author: "bench".into(),
                ops: vec![Op::Put {
                    path: "file.bin".into(),
                    blob,
                }],
            },
        )
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let served = hub.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router(served)).await.unwrap();
        });
    });
    let hub_url = format!(
        "http://{}/kernels/bench/blob/resolve/main/file.bin",
        rx.recv().unwrap()
    );
    let mut nginx = args
        .nginx
        .as_deref()
        .map(|bin| start_nginx(bin, dir.path(), &www));

    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    for &clients in &args.clients {
        let (hub_bps, hub_reqs) = measure(&hub_url, clients, args.seconds, size);
        let mut line = format!(
            "{{\"file_mib\": {}, \"clients\": {clients}, \"seconds\": {}, \"cores\": {cores}, \
             \"kforge_hub_mib_s\": {:.1}, \"kforge_hub_requests\": {hub_reqs}",
            args.size_mib,
            args.seconds,
            hub_bps / (1 << 20) as f64
        );
        if let Some((_, url)) = &nginx {
            let (ng_bps, ng_reqs) = measure(url, clients, args.seconds, size);
            line.push_str(&format!(
                ", \"nginx_mib_s\": {:.1}, \"nginx_requests\": {ng_reqs}, \"ratio\": {:.3}",
                ng_bps / (1 << 20) as f64,
                hub_bps / ng_bps
            ));
        }
        println!("{line}}}");
    }
    if let (Some((child, _)), Some(bin)) = (nginx.as_mut(), args.nginx.as_deref()) {
        stop_nginx(bin, dir.path(), child);
    }
}

/// `nginx -s stop` makes the master stop its workers; a SIGKILL of the master would orphan them.
fn stop_nginx(bin: &str, root: &Path, child: &mut Child) {
    let _ = Command::new(bin)
        .arg("-p")
        .arg(root)
        .arg("-c")
        .arg(root.join("nginx.conf"))
        .args(["-s", "stop"])
        .status();
    let _ = child.wait();
}
