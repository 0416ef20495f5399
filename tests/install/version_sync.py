"""One version number: project(sluice VERSION ...) in CMakeLists.txt.

Checks that pyproject.toml takes its version from there (dynamic, through
scikit-build-core's regex provider, whose regex must find exactly the
version CMake configured), that the generated sluice/version.h agrees and
that the library says so too (`sluice --version`: sl_version_string()).
    version_sync.py SRC_DIR PROJECT_VERSION GENERATED_VERSION_H SLUICE_CLI
"""
import re
import subprocess
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    print("version_sync: no tomllib (Python < 3.11); skipped")
    sys.exit(77)

src, version, header, cli = sys.argv[1:5]
with open(f"{src}/pyproject.toml", "rb") as f:
    py = tomllib.load(f)
errors = []
if "version" in py["project"]:
    errors.append("pyproject.toml: [project] has a literal version; use dynamic")
if "version" not in py["project"].get("dynamic", []):
    errors.append('pyproject.toml: "version" is not in [project] dynamic')
meta = py["tool"]["scikit-build"]["metadata"]["version"]
if meta.get("provider") != "scikit_build_core.metadata.regex":
    errors.append(f"pyproject.toml: version provider is {meta.get('provider')}")
with open(f"{src}/{meta['input']}", encoding="utf-8") as f:
    m = re.search(meta["regex"], f.read(), re.MULTILINE)
found = m.group("value") if m else None
if found != version:
    errors.append(f"pyproject.toml's regex on {meta['input']} gives {found}, "
                  f"CMake configured {version}")

with open(header, encoding="utf-8") as f:
    h = f.read()
parts = [re.search(rf"#define SL_VERSION_{k} (\d+)", h) for k in
         ("MAJOR", "MINOR", "PATCH")]
hv = ".".join(p.group(1) for p in parts) if all(parts) else None
if hv != version:
    errors.append(f"{header} says {hv}, CMake configured {version}")
if f'#define SL_VERSION_STRING "{version}"' not in h:
    errors.append(f"{header}: SL_VERSION_STRING is not \"{version}\"")

out = subprocess.run([cli, "--version"], capture_output=True, text=True).stdout
if out.strip() != f"sluice {version}":
    errors.append(f"`sluice --version` says {out.strip()!r}, CMake configured {version}")

for e in errors:
    print("version_sync:", e)
if errors:
    sys.exit(1)
print(f"version_sync: {version} in CMakeLists.txt, pyproject.toml (regex), version.h")
