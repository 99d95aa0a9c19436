//! Build script: does nothing unless the `dpdk` feature is on. With it,
//! compiles `dpdk/shim.c` (plain functions over DPDK's inline `rte_lpm` /
//! `rte_lpm6` API) with libdpdk's cflags from `pkg-config` and links
//! `librte_lpm` and its dependencies. Needs Debian's `libdpdk-dev` (DPDK
//! 22.11) and `pkg-config`.

fn main() {
    // Without this line Cargo would re-run the script after any change in
    // the package.
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "dpdk")]
    dpdk::build();
}

#[cfg(feature = "dpdk")]
mod dpdk {
    use std::process::Command;

    const INSTALL: &str = "install it with `apt-get install libdpdk-dev pkg-config` \
                           (DPDK 22.11), or build without the `dpdk` feature";

    fn pkg_config(args: &[&str]) -> Vec<String> {
        let out = Command::new("pkg-config")
            .args(args)
            .arg("libdpdk")
            .output()
            .unwrap_or_else(|e| {
                panic!("nexthop-lpm `dpdk` feature: cannot run pkg-config ({e}); {INSTALL}")
            });
        if !out.status.success() {
            panic!(
                "nexthop-lpm `dpdk` feature: `pkg-config {} libdpdk` failed: {}; {INSTALL}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    pub fn build() {
        println!("cargo:rerun-if-changed=dpdk/shim.c");
        println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
        let version = pkg_config(&["--modversion"]).join("");
        let major: u32 = version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        if major < 20 {
            panic!(
                "nexthop-lpm `dpdk` feature: libdpdk {version} found, 20.11 or newer \
                 needed (32-bit rte_lpm entries); {INSTALL}"
            );
        }

        let mut b = cc::Build::new();
        b.file("dpdk/shim.c").warnings(true);
        // libdpdk's cflags: -I..., -include rte_config.h, -march=...
        let cflags = pkg_config(&["--cflags"]);
        let mut it = cflags.iter();
        while let Some(f) = it.next() {
            if let Some(dir) = f.strip_prefix("-I") {
                b.include(dir);
            } else if f == "-include" {
                if let Some(h) = it.next() {
                    b.flag("-include").flag(h);
                }
            } else {
                b.flag(f);
            }
        }
        b.compile("nexthop_dpdk_shim");

        for f in pkg_config(&["--libs"]) {
            if let Some(dir) = f.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={dir}");
            } else if let Some(lib) = f.strip_prefix("-l") {
                println!("cargo:rustc-link-lib=dylib={lib}");
            }
            // Other flags (`-Wl,--as-needed`) only trim unused libraries;
            // `rustc-link-arg` would not reach binaries of dependent crates
            // anyway, so they are left out.
        }
    }
}
