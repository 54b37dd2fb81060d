"""pdoc with the native module's stubs (cargo xtask docs runs it: xtask/src/docs.rs).

deskwire.oa1 and the other public modules re-export the classes and functions of the native
module deskwire._deskwire.oa1, whose types are in its stub, deskwire/_deskwire/oa1.pyi. pdoc
reads a stub beside the module it documents only (deskwire/oa1.pyi): here a public module
without one takes its native module's. Stubs are read as stubs are: annotations unevaluated
(they name classes defined further down), relative imports from the native package.
"""
import __future__
import os
import sys
import types
import warnings

# A stub pdoc cannot read (or whose kinds differ from the module's) fails the build, instead of
# leaving its types out of the pages.
warnings.filterwarnings("error", message="Error parsing type stubs")
warnings.filterwarnings("error", message="Error processing type stub")

if os.environ.get("PDOC_PATH"):
    # After the interpreter's own site-packages, which hold the deskwire to document.
    sys.path.append(os.environ["PDOC_PATH"])

import pdoc.doc_pyi as pyi
from pdoc.__main__ import cli

own = pyi.find_stub_file
stub_names = {}


def find_stub_file(name):
    found = own(name)
    if found is None and name.split(".")[0] == "deskwire" and "._" not in name:
        native = "deskwire._deskwire" + name[len("deskwire"):]
        found = own(native)
        if found is not None:
            stub_names[str(found)] = native
    return found


def import_stub_file(module_name, stub_file):
    module = types.ModuleType(module_name)
    module.__file__ = str(stub_file)
    real = stub_names.get(str(stub_file), module_name)
    module.__package__ = real if stub_file.name == "__init__.pyi" else real.rpartition(".")[0]
    code = compile(stub_file.read_text(), str(stub_file), "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, module.__dict__)
    return module


pyi.find_stub_file = find_stub_file
pyi._import_stub_file = import_stub_file
sys.argv[0] = "pdoc"
cli()
