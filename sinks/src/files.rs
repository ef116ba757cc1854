//! The one way a sink reads a file its config names (`tls.ca_file`/`cert_file`/`key_file`,
//! Kafka's `sasl.token_file`, NATS's `auth.credentials_file`, the HTTP sink's `cacertfile`).
//!
//! Config load already refuses such an option when it names the gateway's own files
//! (`ankusa_config::check_file_options`: the config file, its directory, the admin TLS
//! directories, `node.data_dir`). Files are read again at every connect, and a symlink can be
//! changed after load, so every read here checks once more, against the same
//! [`OwnFiles`]: the path as given (lexically and through its symlinks), and then the file
//! actually opened (`/proc/self/fd`), whatever links led to it, and its identity (device and
//! inode) against the config file's. Only a regular file is read (a FIFO or a device is not:
//! it is opened non-blocking and refused), and at most [`MAX_FILE_BYTES`] of it: a token or a
//! PEM bundle is small.
//!
//! The own files are one per process: the gateway installs them once at start ([`protect`];
//! the config file's path, `node.data_dir` and the admin TLS files do not change without a
//! restart). Reads happen deep inside connection registries shared by every sink of a broker
//! and in the intake's client, which hold no build context, so the set is process-wide rather
//! than threaded through each. Until `protect` runs (tools, benches, tests) nothing is
//! forbidden, and the size and file-type rules still hold. Errors name the option, never the
//! path or any of the file's content.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use ankusa_config::OwnFiles;

/// Most bytes read from one file.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Why a file option could not be read. `field` is the option (`tls.key_file`,
/// `sources.s.sinks[0].cacertfile`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileReadError {
    #[error("{field}: {}", ankusa_config::OWN_FILE_REFUSAL)]
    Own { field: String },
    #[error("{field}: cannot read the file ({kind})")]
    Read {
        field: String,
        kind: std::io::ErrorKind,
    },
    #[error("{field}: is not a regular file")]
    NotAFile { field: String },
    #[error("{field}: the file is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge { field: String },
}

static OWN: RwLock<Option<Arc<OwnFiles>>> = RwLock::new(None);

/// Installs the gateway's own files: from now on no sink reads any of them.
pub fn protect(own: OwnFiles) {
    *OWN.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(own));
}

fn own() -> Arc<OwnFiles> {
    OWN.read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .unwrap_or_default()
}

/// Reads the file of option `field` under the process's own-file rule (see the module
/// header).
pub fn read(field: &str, path: &Path) -> Result<Vec<u8>, FileReadError> {
    read_with(&own(), field, path)
}

/// [`read`] as text (a token, a `.creds` file).
pub fn read_to_string(field: &str, path: &Path) -> Result<String, FileReadError> {
    String::from_utf8(read(field, path)?).map_err(|_| FileReadError::Read {
        field: field.to_string(),
        kind: std::io::ErrorKind::InvalidData,
    })
}

/// [`read`] with an explicit set of own files.
pub fn read_with(own: &OwnFiles, field: &str, path: &Path) -> Result<Vec<u8>, FileReadError> {
    let refused = || FileReadError::Own {
        field: field.to_string(),
    };
    let io = |e: std::io::Error| FileReadError::Read {
        field: field.to_string(),
        kind: e.kind(),
    };
    if own.refuses(path, None) {
        return Err(refused());
    }
    let file = open_nonblocking(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FileReadError::NotAFile {
            field: field.to_string(),
        });
    }
    // The file actually opened: a link swapped between the check above and the open is seen
    // here. Where `/proc` is missing, the path's canonical form stands in.
    let opened = opened_path(&file).or_else(|| std::fs::canonicalize(path).ok());
    if opened.is_none_or(|p| own.refuses(&p, None)) || same_file_as_own(own, &meta) {
        return Err(refused());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(FileReadError::TooLarge {
            field: field.to_string(),
        });
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(io)?;
    if out.len() as u64 > MAX_FILE_BYTES {
        return Err(FileReadError::TooLarge {
            field: field.to_string(),
        });
    }
    Ok(out)
}

/// Opens for reading without blocking on a FIFO (whose type is then refused) and without
/// making a terminal the controlling one.
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

fn opened_path(file: &std::fs::File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

/// Whether the opened file is one of the own files under another name (a hard link).
fn same_file_as_own(own: &OwnFiles, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    own.files()
        .iter()
        .any(|f| std::fs::metadata(f).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_config::Config;

    /// A config dir with the config file, and a sink-key dir beside it.
    fn layout() -> (tempfile::TempDir, PathBuf, PathBuf, OwnFiles) {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("conf");
        let keys = d.path().join("keys");
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::create_dir_all(&keys).unwrap();
        let cfg_path = conf.join("gw.yaml");
        std::fs::write(&cfg_path, "admin: {tokens: [{token: the-admin-token}]}").unwrap();
        let mut c = Config::default();
        c.node.data_dir = d.path().join("data");
        let own = OwnFiles::of(&c, Some(&cfg_path));
        (d, conf, keys, own)
    }

    #[test]
    fn a_file_of_its_own_directory_is_read() {
        let (_d, _conf, keys, own) = layout();
        std::fs::write(keys.join("token"), "tok").unwrap();
        assert_eq!(
            read_with(&own, "sasl.token_file", &keys.join("token")).unwrap(),
            b"tok"
        );
        assert_eq!(
            read_with(&own, "sasl.token_file", &keys.join("missing")),
            Err(FileReadError::Read {
                field: "sasl.token_file".into(),
                kind: std::io::ErrorKind::NotFound
            })
        );
    }

    #[test]
    fn a_symlink_into_the_config_dir_is_refused_at_read_time() {
        let (_d, conf, keys, own) = layout();
        // Harmless at load, then pointed at the config file.
        std::fs::write(keys.join("real-token"), "tok").unwrap();
        std::os::unix::fs::symlink(keys.join("real-token"), keys.join("token")).unwrap();
        assert!(read_with(&own, "sasl.token_file", &keys.join("token")).is_ok());
        std::fs::remove_file(keys.join("token")).unwrap();
        std::os::unix::fs::symlink(conf.join("gw.yaml"), keys.join("token")).unwrap();
        let e = read_with(&own, "sasl.token_file", &keys.join("token")).unwrap_err();
        assert_eq!(
            e,
            FileReadError::Own {
                field: "sasl.token_file".into()
            }
        );
        assert!(
            e.to_string()
                .starts_with("sasl.token_file: names a file under")
        );
        assert!(!e.to_string().contains("admin-token"));
        // A linked directory, and a hard link, are refused too.
        std::os::unix::fs::symlink(&conf, keys.join("confdir")).unwrap();
        assert!(matches!(
            read_with(&own, "tls.ca_file", &keys.join("confdir/gw.yaml")),
            Err(FileReadError::Own { .. })
        ));
        if std::fs::hard_link(conf.join("gw.yaml"), keys.join("hard")).is_ok() {
            assert!(matches!(
                read_with(&own, "tls.ca_file", &keys.join("hard")),
                Err(FileReadError::Own { .. })
            ));
        }
    }

    #[test]
    fn dot_dot_traversal_is_refused() {
        let (_d, _conf, keys, own) = layout();
        let e = read_with(&own, "tls.key_file", &keys.join("../conf/gw.yaml")).unwrap_err();
        assert!(matches!(e, FileReadError::Own { .. }), "{e}");
        let e = read_with(&own, "tls.key_file", &keys.join("../data/x")).unwrap_err();
        assert!(matches!(e, FileReadError::Own { .. }), "{e}");
    }

    #[test]
    fn size_and_type_are_bounded() {
        let (_d, _conf, keys, own) = layout();
        let big = keys.join("big.pem");
        std::fs::write(&big, vec![b'a'; MAX_FILE_BYTES as usize + 1]).unwrap();
        assert!(matches!(
            read_with(&own, "tls.ca_file", &big),
            Err(FileReadError::TooLarge { .. })
        ));
        assert!(matches!(
            read_with(&own, "tls.ca_file", &keys),
            Err(FileReadError::NotAFile { .. })
        ));
        // A FIFO is refused without blocking on it.
        let fifo = keys.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if made {
            assert!(matches!(
                read_with(&own, "tls.ca_file", &fifo),
                Err(FileReadError::NotAFile { .. })
            ));
        }
    }
}
