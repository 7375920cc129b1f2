//! Driver overhead per I/O against the data-less emulator; prints JSON.
//! The same as `zns bench overhead --json`.

fn main() {
    let report = zns_bench::overhead::run(&Default::default()).expect("benchmark");
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
}
