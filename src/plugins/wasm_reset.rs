//! Whether a WebAssembly plugin's instance can be kept between calls and put back as it was
//! after each (docs/plugins.md §8), read once from the module when it is loaded.
//!
//! What a call can change in an instance is its memory, its mutable globals, its tables and
//! its dropped segments. Parasol restores the memory from a copy taken after instantiation and
//! sets each mutable global back to its first value; it cannot read or write a global the
//! module does not export (wasmi reaches an instance's items only through its exports), so the
//! module is given one more export per mutable global, under a name of Parasol's
//! ([`RESET_EXPORT`]`<index>`), before it is compiled. A module whose code can change a table
//! (`table.set`, `table.grow`, `table.fill`, `table.copy`, `table.init`) or drop a segment
//! (`elem.drop`, `data.drop`), or that has more than one memory, cannot be put back this way and
//! is given a fresh instance for each call, as every module was before.

use wasmparser::{Operator, Parser, Payload};

/// The prefix of the exports Parasol adds for a module's mutable globals.
pub const RESET_EXPORT: &str = "parasol.reset.global.";

/// A module that can be kept and reset: its bytes with an export for each mutable global, and
/// those exports' names.
pub struct Resettable {
    pub bytes: Vec<u8>,
    pub globals: Vec<String>,
}

/// `bytes` made resettable, or why it cannot be (a module that does not parse is one that
/// cannot; its compilation then says what is wrong with it).
pub fn resettable(bytes: &[u8]) -> Result<Resettable, String> {
    let mut memories = 0;
    let mut mutable = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| e.to_string())? {
            Payload::MemorySection(reader) => memories += reader.count(),
            Payload::GlobalSection(reader) => {
                // Imports are refused, so a global's index is its place in this section.
                for (index, global) in (0u32..).zip(reader) {
                    if global.map_err(|e| e.to_string())?.ty.mutable {
                        mutable.push(index);
                    }
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let name = export.map_err(|e| e.to_string())?.name;
                    if name.starts_with(RESET_EXPORT) {
                        return Err(format!("it exports {name:?}, a name Parasol reserves"));
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                let mut ops = body.get_operators_reader().map_err(|e| e.to_string())?;
                while !ops.eof() {
                    if let Some(what) = lasting(&ops.read().map_err(|e| e.to_string())?) {
                        return Err(format!("its code {what}"));
                    }
                }
            }
            _ => {}
        }
    }
    if memories != 1 {
        return Err(format!("it has {memories} memories, not one"));
    }
    let globals: Vec<String> = mutable
        .iter()
        .map(|index| format!("{RESET_EXPORT}{index}"))
        .collect();
    let bytes = with_exports(bytes, &mutable, &globals)
        .ok_or_else(|| "it has no export section".to_string())?;
    Ok(Resettable { bytes, globals })
}

/// What an instruction changes that a reset could not put back, if anything.
fn lasting(op: &Operator<'_>) -> Option<&'static str> {
    match op {
        Operator::TableSet { .. }
        | Operator::TableGrow { .. }
        | Operator::TableFill { .. }
        | Operator::TableCopy { .. }
        | Operator::TableInit { .. } => Some("changes a table"),
        Operator::ElemDrop { .. } | Operator::DataDrop { .. } => Some("drops a segment"),
        _ => None,
    }
}

/// `bytes` with its export section extended by `names[i]` exporting global `globals[i]`; None
/// if the module has no export section.
fn with_exports(bytes: &[u8], globals: &[u32], names: &[String]) -> Option<Vec<u8>> {
    const EXPORT_SECTION: u8 = 7;
    const GLOBAL_KIND: u8 = 3;
    let mut out = bytes.get(..8)?.to_vec();
    let mut at = 8;
    let mut found = false;
    while at < bytes.len() {
        let id = bytes[at];
        let (size, n) = read_u32(bytes.get(at + 1..)?)?;
        let start = at + 1 + n;
        let content = bytes.get(start..start.checked_add(size as usize)?)?;
        if id == EXPORT_SECTION {
            found = true;
            let (count, n) = read_u32(content)?;
            let mut section = Vec::with_capacity(content.len() + 32 * names.len());
            write_u32(
                &mut section,
                count.checked_add(u32::try_from(names.len()).ok()?)?,
            );
            section.extend_from_slice(&content[n..]);
            for (&index, name) in globals.iter().zip(names) {
                write_u32(&mut section, u32::try_from(name.len()).ok()?);
                section.extend_from_slice(name.as_bytes());
                section.push(GLOBAL_KIND);
                write_u32(&mut section, index);
            }
            out.push(id);
            write_u32(&mut out, u32::try_from(section.len()).ok()?);
            out.extend_from_slice(&section);
        } else {
            out.extend_from_slice(&bytes[at..start + content.len()]);
        }
        at = start + content.len();
    }
    found.then_some(out)
}

/// An unsigned LEB128 number at the start of `bytes`, and how many bytes it took.
fn read_u32(bytes: &[u8]) -> Option<(u32, usize)> {
    let mut value = 0u32;
    for (i, &byte) in bytes.iter().take(5).enumerate() {
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

fn write_u32(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(text: &str) -> Vec<u8> {
        wat::parse_str(text).expect("valid WAT")
    }

    #[test]
    fn every_mutable_global_is_exported_under_parasols_name_and_nothing_else_changes() {
        let text = r#"(module
            (memory (export "memory") 1)
            (global $a (mut i32) (i32.const 7))
            (global $b i64 (i64.const 1))
            (global $c (export "c") (mut i64) (i64.const 9))
            (func (export "f") (result i32) (global.get $a)))"#;
        let reset = resettable(&module(text)).expect("resettable");
        assert_eq!(
            reset.globals,
            ["parasol.reset.global.0", "parasol.reset.global.2"]
        );
        let mut exports = Vec::new();
        for payload in Parser::new(0).parse_all(&reset.bytes) {
            if let Payload::ExportSection(reader) = payload.expect("parses") {
                for export in reader {
                    let export = export.expect("an export");
                    exports.push((export.name.to_string(), export.index));
                }
            }
        }
        let names: Vec<(&str, u32)> = exports.iter().map(|(n, i)| (n.as_str(), *i)).collect();
        assert_eq!(
            names,
            [
                ("memory", 0),
                ("c", 2),
                ("f", 0),
                ("parasol.reset.global.0", 0),
                ("parasol.reset.global.2", 2)
            ]
        );
        wasmparser::validate(&reset.bytes).expect("still a valid module");
    }

    #[test]
    fn a_module_whose_state_a_reset_cannot_put_back_is_named_with_why() {
        let cases = [
            (
                r#"(module (memory (export "memory") 1) (table 1 funcref)
                   (func (export "f") (table.set 0 (i32.const 0) (ref.null func))))"#,
                "its code changes a table",
            ),
            (
                r#"(module (memory (export "memory") 1) (data "x")
                   (func (export "f") (data.drop 0)))"#,
                "its code drops a segment",
            ),
            (
                r#"(module (memory (export "memory") 1) (memory 1))"#,
                "it has 2 memories, not one",
            ),
            (
                r#"(module (memory (export "parasol.reset.global.0") 1))"#,
                "a name Parasol reserves",
            ),
            (r#"(module (memory 1))"#, "it has no export section"),
        ];
        for (text, why) in cases {
            let refused = resettable(&module(text)).err().expect(why);
            assert!(refused.contains(why), "{refused}");
        }
    }

    #[test]
    fn a_leb128_number_reads_back_as_written() {
        for value in [0, 1, 127, 128, 300, 16_383, 16_384, u32::MAX] {
            let mut out = Vec::new();
            write_u32(&mut out, value);
            assert_eq!(read_u32(&out), Some((value, out.len())));
        }
        assert_eq!(read_u32(&[0x80, 0x80]), None);
    }
}
