//! `zns ftl serve` as a user runs it: the FTL on an image exported over
//! NBD, written by a client, stopped by SIGTERM with a checkpoint, the
//! image locked while served; and real NBD clients (`qemu-io`,
//! `qemu-img` from qemu-utils) reading and writing the export.

mod common;

use common::{have, ok, run_tool, zns, Server};
use zns_nbd::NbdClient;

/// `zns --device URI ftl serve` on a free loopback port, with `extra`.
fn serve(uri: &str, extra: &[&str]) -> Server {
    let mut args = vec!["--device", uri, "ftl", "serve", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    Server::start(&args)
}

fn image(profile: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    ok(zns(&["emu", "create", path.to_str().unwrap(), "--profile", profile]));
    (dir, format!("emu:file={}", path.display()))
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(13) ^ seed).collect()
}

#[test]
fn served_writes_survive_a_sigterm_and_the_image_is_locked_meanwhile() {
    let (_dir, uri) = image("tiny");
    let e = zns(&["--device", &uri, "ftl", "serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(e.code, 1);
    assert!(e.stderr.contains("holds no FTL") && e.stderr.contains("ftl format"), "{}", e.stderr);
    ok(zns(&["--device", &uri, "ftl", "format"]));

    let server = serve(&uri, &["--export", "disk"]);
    let mut c = NbdClient::connect(server.addr.as_str(), "disk").unwrap();
    c.write(40960, &pattern(32768, 7), false).unwrap();
    // A second server, or any command, on the image is refused.
    let second = zns(&["--device", &uri, "ftl", "serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(second.code, 1);
    assert!(second.stderr.contains("in use"), "{}", second.stderr);
    let stats = zns(&["--device", &uri, "ftl", "stats"]);
    assert!(stats.stderr.contains("in use"), "{}", stats.stderr);
    drop(c);
    let rest = server.stop();
    assert!(rest.contains("checkpoint written"), "{rest}");
    assert!(rest.contains("1 connections"), "{rest}");

    // The unflushed write is in the checkpoint; the FTL checks clean.
    let check = ok(zns(&["--device", &uri, "ftl", "check", "--read-all"]));
    assert!(check.stdout.contains("no problems found"), "{}", check.stdout);
    let server = serve(&uri, &["--export", "disk", "--read-only"]);
    let mut c = NbdClient::connect(server.addr.as_str(), "").unwrap();
    let mut back = vec![0u8; 32768];
    c.read(40960, &mut back).unwrap();
    assert!(back == pattern(32768, 7), "the served write did not survive the restart");
    assert!(c.write(0, &back[..4096], false).is_err(), "a read-only export took a write");
    drop(c);
    server.stop();
}

#[test]
fn the_zrwa_switch_decides_whether_the_log_commits_zone_random_write_areas() {
    let (unpadded, padded) = ("emu:tiny,metadata=16,zrwa=8/1/2", "emu:tiny,metadata=16,zrwa=8/4/2");
    let cases = [
        (unpadded, "auto", true),
        (padded, "auto", false),
        (padded, "on", true),
        (unpadded, "off", false),
    ];
    for (uri, zrwa, used) in cases {
        let server = serve(uri, &["--zrwa", zrwa]);
        let mut c = NbdClient::connect(server.addr.as_str(), "").unwrap();
        for i in 0..8u64 {
            c.write(i * 4096, &pattern(4096, i as u8), false).unwrap();
            c.flush().unwrap();
        }
        drop(c);
        let rest = server.stop();
        assert_eq!(rest.contains("zone random write areas"), used, "{uri} --zrwa {zrwa}: {rest}");
    }
}

#[test]
fn qemu_io_and_qemu_img_use_the_export() {
    if !have("qemu-io", "qemu-utils") || !have("qemu-img", "qemu-utils") {
        return;
    }
    let (io, img) = ("qemu-io", "qemu-img");
    let server = serve("emu:small", &[]);
    let url = format!("nbd://{}/ftl", server.addr);
    let info = run_tool(img, &["info", "--output=json", &url]);
    assert!(info.contains("\"virtual-size\""), "{info}");

    let out = run_tool(
        io,
        &[
            "-f",
            "raw",
            &url,
            "-c",
            "write -P 0xa5 0 1M",
            "-c",
            "write -P 0x3c 4k 8k",
            "-c",
            "flush",
            "-c",
            "read -P 0xa5 0 4k",
            "-c",
            "read -P 0x3c 4k 8k",
            "-c",
            "read -P 0xa5 12k 1012k",
            "-c",
            "write -z 64k 64k",
            "-c",
            "read -P 0 64k 64k",
            "-c",
            "discard 256k 128k",
            "-c",
            "read -P 0xa5 128k 128k",
            "-c",
            "write -P 0x77 -f 2M 64k",
            "-c",
            "read -P 0x77 2M 64k",
        ],
    );
    assert!(!out.contains("failed") && !out.contains("error"), "{out}");
    assert_eq!(out.matches("wrote").count(), 4, "{out}");
    assert_eq!(out.matches("read ").count(), 6, "{out}");

    // A whole file through qemu-img, compared byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("src.raw");
    std::fs::write(&file, pattern(3 << 20, 0x5a)).unwrap();
    let file = file.to_str().unwrap();
    run_tool(img, &["convert", "-n", "-f", "raw", "-O", "raw", file, &url]);
    let cmp = run_tool(img, &["compare", "-f", "raw", "-F", "raw", file, &url]);
    assert!(cmp.contains("identical") || cmp.contains("Images are identical"), "{cmp}");
    let rest = server.stop();
    assert!(rest.contains("0 closed for protocol errors"), "{rest}");
}
