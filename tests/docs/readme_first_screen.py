"""The README's first screen (issue 18): what a newcomer sees before scrolling.

Checks that its first 40 lines hold the two commands (`make demo`,
`make check`) and a picture; that each picture there exists, is under
300 KB and is the one scripts/readme-plot.sh regenerates; and that every
local link or image anywhere in the README points at a file of the repo.
    readme_first_screen.py SRC_DIR
"""
import os
import re
import sys

FIRST = 40
MAX_BYTES = 300 * 1024
src = sys.argv[1]
with open(os.path.join(src, "README.md"), encoding="utf-8") as f:
    lines = f.read().splitlines()
head = "\n".join(lines[:FIRST])
errors = []

for cmd in ("make demo", "make check"):
    if not re.search(rf"^{cmd}\b", head, re.MULTILINE):
        errors.append(f"README.md: `{cmd}` does not start a line in the first {FIRST} lines")


def targets(text):
    """Local paths of Markdown links/images and <img src=...>."""
    found = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'<img[^>]*\bsrc="([^"]+)"', text)
    return [t.split("#")[0] for t in found if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


pictures = [t for t in targets(head) if t.endswith((".png", ".svg", ".jpg"))]
if not pictures:
    errors.append(f"README.md: no picture in the first {FIRST} lines")
with open(os.path.join(src, "scripts/readme-plot.sh"), encoding="utf-8") as f:
    script = f.read()
m = re.search(r"out=\$\{2:-([^}]+)\}", script)
made = m.group(1).removeprefix("$root/") if m else None
for p in pictures:
    path = os.path.join(src, p)
    if not os.path.isfile(path):
        errors.append(f"README.md: first-screen picture {p} does not exist")
    elif os.path.getsize(path) >= MAX_BYTES:
        errors.append(f"{p}: {os.path.getsize(path)} bytes, not under {MAX_BYTES}")
    if p != made:
        errors.append(f"README.md shows {p}, scripts/readme-plot.sh writes {made}")
if not os.access(os.path.join(src, "scripts/readme-plot.sh"), os.X_OK):
    errors.append("scripts/readme-plot.sh is not executable")

for t in targets("\n".join(lines)):
    if t and not os.path.exists(os.path.join(src, t)):
        errors.append(f"README.md links to {t}, which does not exist")

for e in errors:
    print("readme_first_screen:", e)
print(f"readme_first_screen: {'FAIL' if errors else 'ok'} "
      f"({len(pictures)} picture(s) in the first {FIRST} lines)")
sys.exit(1 if errors else 0)
