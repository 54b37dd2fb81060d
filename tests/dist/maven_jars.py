"""Checks the sources and javadoc JARs that cargo xtask dist puts beside the JAR in dist/maven,
the two Maven Central requires of every release:

    python3 tests/dist/maven_jars.py dist/maven/dev/deskwire/deskwire/VERSION VERSION bindings/kotlin

- deskwire-VERSION-sources.jar: a valid ZIP (every entry's CRC checked) holding every .kt file
  of src/main/kotlin and src/generated/kotlin at its package path, and no native library.
- deskwire-VERSION-javadoc.jar: a valid ZIP of Dokka's HTML: index.html, the module's
  package-list, and a page for every public top-level class, interface and object declared in
  src/main/kotlin (Dokka names the directory of `DeskConnection` `-desk-connection`).
Prints what it found; exits non-zero, naming what is missing, otherwise.
"""
import re
import sys
import zipfile
from pathlib import Path

base, version, kotlin = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
problems = []


def open_jar(suffix):
    path = base / f"deskwire-{version}{suffix}"
    if not path.is_file():
        sys.exit(f"no {path}")
    jar = zipfile.ZipFile(path)
    bad = jar.testzip()
    if bad is not None:
        sys.exit(f"{path}: the entry {bad} is corrupt")
    return path, set(jar.namelist())


sources_path, sources = open_jar("-sources.jar")
kt_files = []
for root in ("src/main/kotlin", "src/generated/kotlin"):
    for file in sorted((kotlin / root).rglob("*.kt")):
        kt_files.append(file.relative_to(kotlin / root).as_posix())
if not kt_files:
    sys.exit(f"no Kotlin sources under {kotlin}")
for name in kt_files:
    if name not in sources:
        problems.append(f"{sources_path.name} lacks {name}")
natives = [n for n in sources if n.endswith((".so", ".dll", ".dylib"))]
if natives:
    problems.append(f"{sources_path.name} carries native libraries: {natives}")

javadoc_path, javadoc = open_jar("-javadoc.jar")
for name in ("index.html", "deskwire/package-list"):
    if name not in javadoc:
        problems.append(f"{javadoc_path.name} lacks {name}")
declaration = re.compile(
    r"^(?:(?:public|open|data|sealed|abstract|enum|fun|value|annotation)\s+)*"
    r"(?:class|interface|object)\s+([A-Z]\w*)",
    re.MULTILINE,
)
types = []
for file in sorted((kotlin / "src/main/kotlin").rglob("*.kt")):
    text = file.read_text()
    package = re.search(r"^package\s+([\w.]+)", text, re.MULTILINE).group(1)
    for name in declaration.findall(text):
        dokka = re.sub(r"[A-Z]", lambda m: "-" + m.group(0).lower(), name)
        page = f"deskwire/{package}/{dokka}/index.html"
        types.append(name)
        if page not in javadoc:
            problems.append(f"{javadoc_path.name} has no page for {name} ({page})")
if not types:
    sys.exit("found no public Kotlin types to look for")

if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
pages = sum(1 for n in javadoc if n.endswith(".html"))
print(f"{sources_path.name}: {len(sources)} entries, all {len(kt_files)} Kotlin files")
print(f"{javadoc_path.name}: {pages} HTML pages, one for each of {len(types)} public types "
      f"({', '.join(types[:4])}, ...)")
print(f"the sources JAR holds all {len(kt_files)} Kotlin files; the javadoc JAR {pages} pages, "
      f"{len(types)} public types among them")
