// The ssh tests are ignored, counted and named, when OpenSSH is missing.
mod peers {
    include!("../tests/integration/peers_cfg.rs");
    pub fn run() {
        main();
    }
}

/// `rex --version` and `rexd --version`: the commit built (`git rev-parse --short HEAD`, or
/// $REXD_GIT_COMMIT as a packager sets it, else "unknown", as from a source tarball) and the
/// cargo features enabled, as REXD_GIT_COMMIT and REXD_FEATURES for `env!`.
fn version_info() {
    println!("cargo::rerun-if-env-changed=REXD_GIT_COMMIT");
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&dir)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let commit = match std::env::var("REXD_GIT_COMMIT") {
        Ok(c) if !c.is_empty() => c,
        _ => git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into()),
    };
    // Rerun when HEAD moves: HEAD itself (a checkout), the branch's ref (a commit) and
    // packed-refs (where a ref may live after `git gc`). Only files that exist are named, as a
    // missing one would make cargo rerun this on every build; outside a checkout, none is.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let git_dir = std::path::PathBuf::from(git_dir);
        let mut watch = vec![git_dir.join("HEAD"), git_dir.join("packed-refs")];
        if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(git_dir.join(head_ref));
        }
        for path in watch.iter().filter(|p| p.is_file()) {
            println!("cargo::rerun-if-changed={}", path.display());
        }
    }
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_owned))
        .filter(|f| f != "DEFAULT")
        .map(|f| f.to_lowercase().replace('_', "-"))
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_owned()
    } else {
        features.join(", ")
    };
    println!("cargo::rustc-env=REXD_GIT_COMMIT={commit}");
    println!("cargo::rustc-env=REXD_FEATURES={features}");
}

fn main() {
    version_info();
    peers::run();
}
