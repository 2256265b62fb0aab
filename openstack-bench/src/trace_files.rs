//! The 2011 Google cluster trace's files as they are published: a table is a folder of part
//! files (`part-00000-of-00500.csv.gz`, …), each gzip-compressed CSV. Both loaders of that
//! trace (ECSched's `task_events`, Flex's `task_events` and `task_usage`) read through here, so
//! either takes a single file or a folder, compressed or not.

use anyhow::Context;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// The files of `path`: the file itself, or a folder's files in name order (the part files'
/// order, which is the trace's time order).
fn files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = std::fs::read_dir(path)
        .and_then(|dir| {
            dir.map(|e| e.map(|e| e.path()))
                .collect::<Result<Vec<_>, _>>()
        })
        .with_context(|| format!("cannot read the folder {}", path.display()))?;
    files.retain(|f| f.is_file());
    files.sort();
    Ok(files)
}

/// One file's bytes, decompressed when its name ends in `.gz` (unbuffered: [`reader`]
/// buffers them all once).
fn open(path: &Path) -> anyhow::Result<Box<dyn Read>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    Ok(if gz {
        // A part file may hold several gzip members: read them all.
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    })
}

/// The text of every file of `path` (see [`files`]) read one after the other, each file
/// opened when the one before it is done (a table of 500 parts holds one open at a time), a
/// line break between two files so that a file without a last one cannot join its last line
/// to the next file's first (both loaders skip empty lines). The first file is opened here, so
/// a missing one is this call's error; a later one's is the read's, naming it.
pub fn reader(path: &Path) -> anyhow::Result<Box<dyn BufRead>> {
    let mut rest = files(path)?.into_iter();
    let current = rest.next().map(|first| open(&first)).transpose()?;
    Ok(Box::new(BufReader::new(Parts { rest, current })))
}

/// The files of a table read in turn: `current` until it ends, then the next of `rest`.
struct Parts {
    rest: std::vec::IntoIter<PathBuf>,
    current: Option<Box<dyn Read>>,
}

impl Read for Parts {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let Some(current) = self.current.as_mut() else {
                return Ok(0);
            };
            let n = current.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            self.current = match self.rest.next() {
                Some(next) => {
                    let next = open(&next).map_err(std::io::Error::other)?;
                    Some(Box::new((&b"\n"[..]).chain(next)))
                }
                None => None,
            };
        }
    }
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
    fn a_part_that_goes_missing_is_a_read_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("part-00000-of-00002.csv"), "a,1\n").unwrap();
        std::fs::write(dir.path().join("part-00001-of-00002.csv"), "b,2\n").unwrap();
        let mut text = reader(dir.path()).unwrap();
        std::fs::remove_file(dir.path().join("part-00001-of-00002.csv")).unwrap();
        let mut all = String::new();
        let err = text.read_to_string(&mut all).unwrap_err();
        assert!(err.to_string().contains("part-00001-of-00002.csv"), "{err}");
    }

    #[test]
    fn a_missing_file_names_itself() {
        let err = reader(Path::new("/nonexistent/task_events.csv.gz"))
            .err()
            .expect("an error");
        assert!(format!("{err:#}").contains("/nonexistent/task_events.csv.gz"));
    }
}
