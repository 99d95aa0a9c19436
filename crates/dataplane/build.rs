//! Build script: does nothing unless the `afxdp` feature is on. With it,
//! compiles `afxdp/shim.c` (plain functions over libxdp's inline AF_XDP
//! ring API in `xdp/xsk.h`) with the cflags of `pkg-config libxdp libbpf`
//! and links libxdp and libbpf. Needs Debian's `libxdp-dev` (1.3) and
//! `libbpf-dev` (installed by `scripts/setup.sh`) and `pkg-config`.

fn main() {
    // Without this line Cargo would re-run the script after any change in
    // the package.
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "afxdp")]
    afxdp::build();
}

#[cfg(feature = "afxdp")]
mod afxdp {
    use std::process::Command;

    const INSTALL: &str = "install them with `apt-get install libxdp-dev libbpf-dev pkg-config` \
                           (or run scripts/setup.sh), or build nexthop-cli with \
                           `--no-default-features` (AF_PACKET ports only)";

    fn pkg_config(args: &[&str]) -> Vec<String> {
        let out = Command::new("pkg-config")
            .args(args)
            .args(["libxdp", "libbpf"])
            .output()
            .unwrap_or_else(|e| {
                panic!("nexthop-dataplane `afxdp` feature: cannot run pkg-config ({e}); {INSTALL}")
            });
        if !out.status.success() {
            panic!(
                "nexthop-dataplane `afxdp` feature: `pkg-config {} libxdp libbpf` failed: {}; \
                 {INSTALL}",
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
        println!("cargo:rerun-if-changed=afxdp/shim.c");
        println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
        let mut b = cc::Build::new();
        b.file("afxdp/shim.c")
            .warnings(true)
            .flag_if_supported("-Wextra");
        for f in pkg_config(&["--cflags"]) {
            if let Some(dir) = f.strip_prefix("-I") {
                b.include(dir);
            } else {
                b.flag(&f);
            }
        }
        b.compile("nexthop_xsk_shim");
        for f in pkg_config(&["--libs"]) {
            if let Some(dir) = f.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={dir}");
            } else if let Some(lib) = f.strip_prefix("-l") {
                println!("cargo:rustc-link-lib=dylib={lib}");
            }
        }
    }
}
