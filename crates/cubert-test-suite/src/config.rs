//! Configuration files: a malformed `cubert.toml` gives warnings naming the file and the
//! key, and the defaults are used; it never aborts.

use crate::backend::TestBackend;
use cubert_runtime::config::{CONFIG_FILE_NAME, CubertConfig, load_config_from};
use std::path::Path;

fn write_config(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join(CONFIG_FILE_NAME);
    std::fs::write(&path, text).unwrap();
    path
}

/// Keys with wrong values or unknown names give one warning each, naming the file and the
/// key; those settings keep their defaults, the valid ones apply.
pub fn malformed_config_keys_warn_with_file_and_key_and_use_defaults<B: TestBackend>() {
    let root = tempfile::tempdir().unwrap();
    let path = write_config(
        root.path(),
        "[cpu]\ndevices = \"many\"\nthreads = 3\n\n[memory]\nrounding = 0\n\
         [profiling]\nlevel = \"loud\"\n\n[runtime]\nno_such_key = 1\n",
    );
    let nested = root.path().join("deep/inside");
    std::fs::create_dir_all(&nested).unwrap();
    let loaded = load_config_from(&nested, Vec::<(String, String)>::new());
    assert_eq!(loaded.file.as_deref(), Some(path.as_path()));
    assert_eq!(loaded.warnings.len(), 4, "{:#?}", loaded.warnings);
    let file = path.display().to_string();
    for key in [
        "cpu.devices",
        "memory.rounding",
        "profiling.level",
        "runtime.no_such_key",
    ] {
        let warning = loaded
            .warnings
            .iter()
            .find(|warning| warning.contains(key))
            .unwrap_or_else(|| panic!("no warning names `{key}`: {:#?}", loaded.warnings));
        assert!(warning.contains(&file), "{warning} doesn't name {file}");
    }
    let defaults = CubertConfig::default();
    assert_eq!(loaded.config.cpu.devices, defaults.cpu.devices);
    assert_eq!(loaded.config.memory.rounding, defaults.memory.rounding);
    assert_eq!(loaded.config.profiling.level, defaults.profiling.level);
    assert_eq!(loaded.config.cpu.threads, 3, "valid keys still apply");
}

/// A file that isn't valid TOML gives one warning naming the file, and every setting keeps
/// its default.
pub fn invalid_toml_warns_with_file_and_uses_defaults<B: TestBackend>() {
    let root = tempfile::tempdir().unwrap();
    let path = write_config(root.path(), "[cpu\ndevices = = 3\n");
    let loaded = load_config_from(root.path(), Vec::<(String, String)>::new());
    assert_eq!(loaded.config, CubertConfig::default());
    assert_eq!(loaded.warnings.len(), 1, "{:#?}", loaded.warnings);
    assert!(
        loaded.warnings[0].contains(&path.display().to_string()),
        "{}",
        loaded.warnings[0]
    );
}

/// A section that isn't a table is named in a warning; environment variables with bad
/// values are named too; neither aborts.
pub fn bad_sections_and_environment_values_are_named_in_warnings<B: TestBackend>() {
    let root = tempfile::tempdir().unwrap();
    write_config(
        root.path(),
        "cpu = 4\n[memory]\nsmall_segment = \"4 MiB\"\n",
    );
    let env = vec![
        ("CUBERT_CPU_THREADS".to_string(), "lots".to_string()),
        ("CUBERT_PROFILING_LEVEL".to_string(), "basic".to_string()),
    ];
    let loaded = load_config_from(root.path(), env);
    assert_eq!(loaded.warnings.len(), 2, "{:#?}", loaded.warnings);
    assert!(
        loaded.warnings.iter().any(|w| w.contains("`cpu`")),
        "{:#?}",
        loaded.warnings
    );
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("CUBERT_CPU_THREADS")),
        "{:#?}",
        loaded.warnings
    );
    assert_eq!(loaded.config.memory.small_segment, 4 << 20);
    assert_eq!(
        loaded.config.profiling.level,
        cubert_runtime::config::ProfileLevel::Basic
    );
    assert_eq!(
        loaded.config.cpu.threads,
        CubertConfig::default().cpu.threads
    );
}

/// Variables that aren't UTF-8 never abort loading: other programs' variables are ignored
/// whatever they hold, a `CUBERT_*` one is named in a warning and the other settings apply.
pub fn environment_that_is_not_utf8_is_ignored_with_a_warning<B: TestBackend>() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let root = tempfile::tempdir().unwrap();
    let env: Vec<(OsString, OsString)> = vec![
        ("FOO".into(), OsString::from_vec(b"caf\xe9".to_vec())),
        (OsString::from_vec(b"B\xffR".to_vec()), "1".into()),
        (
            "CUBERT_CPU_THREADS".into(),
            OsString::from_vec(b"\xff2".to_vec()),
        ),
        (OsString::from_vec(b"CUBERT_CPU_\xff".to_vec()), "2".into()),
        ("CUBERT_CPU_DEVICES".into(), "3".into()),
    ];
    let loaded = load_config_from(root.path(), env);
    assert_eq!(loaded.warnings.len(), 2, "{:#?}", loaded.warnings);
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("CUBERT_CPU_THREADS") && w.contains("UTF-8")),
        "{:#?}",
        loaded.warnings
    );
    assert_eq!(loaded.config.cpu.devices, 3);
    assert_eq!(
        loaded.config.cpu.threads,
        CubertConfig::default().cpu.threads
    );
}
