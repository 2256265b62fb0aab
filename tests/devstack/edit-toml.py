"""The operator's editor in tests/devstack/docs.sh, given to sudoedit as $EDITOR:
`edit-toml.py SECTION.KEY=VALUE... FILE` sets each KEY of [SECTION] in FILE to VALUE (written
as TOML, e.g. '"apsr"' or 'true'), replacing the key's line or adding it under the section
header, then checks FILE still parses and holds those values."""
import re
import sys
import tomllib

*edits, path = sys.argv[1:]
lines = open(path).read().splitlines()
for edit in edits:
    dotted, value = edit.split("=", 1)
    section, key = dotted.split(".")
    header = next(i for i, line in enumerate(lines) if line.strip() == f"[{section}]")
    end = next(
        (i for i in range(header + 1, len(lines)) if lines[i].startswith("[")), len(lines)
    )
    line = f"{key} = {value}"
    at = [i for i in range(header + 1, end) if re.match(rf"{re.escape(key)}\s*=", lines[i])]
    if at:
        lines[at[0]] = line
    else:
        lines.insert(header + 1, line)
text = "\n".join(lines) + "\n"
parsed = tomllib.loads(text)
for edit in edits:
    dotted, value = edit.split("=", 1)
    section, key = dotted.split(".")
    assert parsed[section][key] == tomllib.loads(f"v = {value}")["v"], edit
open(path, "w").write(text)
