"""iniset/inidelete for the harness: set or delete one key of an INI file."""
import configparser
import sys

action, path, section, key = sys.argv[1:5]
ini = configparser.RawConfigParser()
ini.optionxform = str
ini.read(path)
if action == "set":
    if not ini.has_section(section):
        ini.add_section(section)
    ini.set(section, key, sys.argv[5])
elif ini.has_section(section):
    ini.remove_option(section, key)
with open(path, "w") as f:
    ini.write(f)
