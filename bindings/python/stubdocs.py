"""Fills the docstrings of the native module's stubs from the compiled module's own (the Rust
doc comments), so an IDE hover shows them; existing docstrings are kept. After adding a
function or method to the native module and its stub, with the package built and installed:

    python bindings/python/stubdocs.py bindings/python/python/deskwire/_deskwire

``tests/test_package.py`` fails on a stub without its docstring."""
import ast, importlib, inspect, re, sys
from pathlib import Path

STUBS = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "python/deskwire/_deskwire"

def rst(doc: str) -> str:
    doc = inspect.cleandoc(doc)
    # Markdown `code` becomes reST ``code``; spans already doubled (which hold single
    # backticks) stay as they are.
    parts = re.split(r"(``.+?``)", doc, flags=re.DOTALL)
    doc = "".join(p if p.startswith("``") else re.sub(r"`([^`]+?)`", r"``\1``", p) for p in parts)
    return doc.replace('"""', "'''").replace("\\", "\\\\")

def docstring_lines(doc: str, indent: int) -> list:
    pad = " " * indent
    lines = rst(doc).splitlines()
    if len(lines) == 1:
        return [f'{pad}"""{lines[0]}"""']
    out = [f'{pad}"""{lines[0]}']
    out += [f"{pad}{l}" if l else "" for l in lines[1:]]
    out.append(f'{pad}"""')
    return out

for stub in sorted(STUBS.glob("*.pyi")):
    modname = "deskwire._deskwire" if stub.stem == "__init__" else f"deskwire._deskwire.{stub.stem}"
    module = importlib.import_module(modname)
    text = stub.read_text()
    tree = ast.parse(text)
    lines = text.splitlines()
    edits = []  # (end_lineno, new def line end, inserted lines)

    def visit(body, owner, indent):
        for node in body:
            if isinstance(node, ast.ClassDef):
                runtime = getattr(owner, node.name, None)
                if ast.get_docstring(node) is None and runtime is not None and runtime.__doc__:
                    edits.append(("class", node, docstring_lines(runtime.__doc__, indent + 4)))
                if runtime is not None:
                    visit(node.body, runtime, indent + 4)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name.startswith("__") or ast.get_docstring(node) is not None:
                    continue
                runtime = inspect.getattr_static(owner, node.name, None) if inspect.isclass(owner) else getattr(owner, node.name, None)
                doc = getattr(runtime, "__doc__", None)
                if doc and not doc.startswith(("Return ", "str(object")) and runtime is not None:
                    edits.append(("def", node, docstring_lines(doc, indent + 4)))
    visit(tree.body, module, 0)
    for kind, node, doc in sorted(edits, key=lambda e: -e[1].lineno):
        if kind == "class":
            # after the `class X:` line (the first body statement's line - 1 is the header end)
            header_end = node.body[0].lineno - 1 if node.body else node.lineno
            # the header may be followed by decorators of the first member: find the line ending with ':'
            i = node.lineno - 1
            while not lines[i].rstrip().endswith(":"):
                i += 1
            lines[i + 1:i + 1] = doc
        else:
            end = node.end_lineno - 1
            assert lines[end].rstrip().endswith("..."), (stub, lines[end])
            lines[end] = lines[end].rstrip()[:-3].rstrip()
            lines[end + 1:end + 1] = doc
    stub.write_text("\n".join(lines) + "\n")
    print(stub.name, len(edits))
