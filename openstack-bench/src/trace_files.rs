//! The 2011 Google cluster trace's files as they are published: a table is a folder of part
//! files (`part-00000-of-00500.csv.gz`, …), each gzip-compressed CSV. Both loaders of that
//! trace (ECSched's `task_events`, Flex's `task_events` and `task_usage`) read through here, so
//! either takes a single file or a folder, compressed or not.

use anyhow::Context;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// The files of `path`: the file itself, or a folder's files in name order (the part files'
/// order, which is the trace's time order).
pub fn files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = std::fs::read_dir(path)
        .with_context(|| format!("cannot read the folder {}", path.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("cannot read the folder {}", path.display()))?;
    files.retain(|f| f.is_file());
    files.sort();
    Ok(files)
}

/// One file's text, decompressed when its name ends in `.gz`.
pub fn open(path: &Path) -> anyhow::Result<Box<dyn BufRead>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    Ok(if gz {
        // A part file may hold several gzip members: read them all.
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(file)))
    } else {
        Box::new(BufReader::new(file))
    })
}

/// The text of every file of `path` (see [`files`]) read one after the other, a line break
/// between two files so that a file without a last one cannot join its last line to the next
/// file's first (both loaders skip empty lines).
pub fn reader(path: &Path) -> anyhow::Result<Box<dyn BufRead>> {
    let mut all: Box<dyn BufRead> = Box::new(std::io::empty());
    for file in files(path)? {
        let next = open(&file)?.chain(&b"\n"[..]);
        all = Box::new(BufReader::new(all.chain(next)));
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(text: &str) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(text.as_bytes()).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn a_folder_of_gzip_and_plain_parts_reads_as_their_lines_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("part-00000-of-00003.csv.gz"),
            gzip("a,1\nb,2"),
        )
        .unwrap();
        // Two gzip members in one file, as concatenated parts are.
        let mut two = gzip("c,3\n");
        two.extend(gzip("d,4\n"));
        std::fs::write(dir.path().join("part-00001-of-00003.csv.gz"), two).unwrap();
        std::fs::write(dir.path().join("part-00002-of-00003.csv"), "e,5\n").unwrap();
        let mut lines = Vec::new();
        for line in reader(dir.path()).unwrap().lines() {
            let line = line.unwrap();
            if !line.is_empty() {
                lines.push(line);
            }
        }
        assert_eq!(lines, ["a,1", "b,2", "c,3", "d,4", "e,5"]);
    }

    #[test]
    fn a_corrupt_gzip_file_is_an_error_not_an_empty_trace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("task_events.csv.gz");
        std::fs::write(&path, b"not gzip at all").unwrap();
        let mut text = String::new();
        assert!(reader(&path).unwrap().read_to_string(&mut text).is_err());
    }

    #[test]
    fn a_missing_file_names_itself() {
        let err = reader(Path::new("/nonexistent/task_events.csv.gz"))
            .err()
            .expect("an error");
        assert!(format!("{err:#}").contains("/nonexistent/task_events.csv.gz"));
    }
}
