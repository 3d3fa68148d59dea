//! Finding and reading the configuration, and the process-wide instance.

use super::schema::CubertConfig;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The file name looked for.
pub const CONFIG_FILE_NAME: &str = "cubert.toml";

/// A configuration with where it came from and what was wrong with it.
#[derive(Clone, Debug, Default)]
pub struct LoadedConfig {
    /// The settings.
    pub config: CubertConfig,
    /// The file read, if any.
    pub file: Option<PathBuf>,
    /// One message per problem (each names the file or variable and the key).
    pub warnings: Vec<String>,
}

/// Finds `cubert.toml` in `start` or the nearest parent directory that has one.
pub fn find_config_file(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|dir| dir.join(CONFIG_FILE_NAME))
        .find(|candidate| candidate.is_file())
}

/// Loads the configuration for this process: `CUBERT_CONFIG` or the nearest `cubert.toml`
/// above the working directory, then the `CUBERT_*` variables.
pub fn load_config() -> LoadedConfig {
    let start = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    // `vars_os`, not `vars`: a variable that isn't UTF-8 (any variable, ours or not) must
    // not take the program down.
    load_config_from(&start, std::env::vars_os())
}

/// Loads the configuration as [`load_config`] does, from `start` and the given environment.
///
/// Names and values may be any OS strings: variables outside `CUBERT_*` are ignored
/// whatever they hold, and a `CUBERT_*` variable whose name or value isn't UTF-8 is ignored
/// with a warning naming it.
pub fn load_config_from<K, V>(start: &Path, env: impl IntoIterator<Item = (K, V)>) -> LoadedConfig
where
    K: Into<OsString>,
    V: Into<OsString>,
{
    let mut loaded = LoadedConfig::default();
    let mut explicit = None;
    let mut variables: Vec<(String, String)> = Vec::new();
    for (name, value) in env {
        let (name, value) = (name.into(), value.into());
        if name == "CUBERT_CONFIG" {
            // A path needs no UTF-8.
            explicit = Some(PathBuf::from(value));
            continue;
        }
        if !name.as_encoded_bytes().starts_with(b"CUBERT_") {
            continue;
        }
        match (name.into_string(), value.into_string()) {
            (Ok(name), Ok(value)) => variables.push((name, value)),
            (Ok(name), Err(_)) => loaded
                .warnings
                .push(format!("{name}: the value is not valid UTF-8; ignored")),
            (Err(name), _) => loaded.warnings.push(format!(
                "{}: the name is not valid UTF-8; ignored",
                name.to_string_lossy()
            )),
        }
    }
    let file = match explicit {
        Some(path) if path.is_file() => Some(path),
        Some(path) => {
            loaded.warnings.push(format!(
                "CUBERT_CONFIG names {}, which is not a file; using defaults",
                path.display()
            ));
            None
        }
        None => find_config_file(start),
    };
    if let Some(path) = file {
        apply_file(&mut loaded, &path);
        loaded.file = Some(path);
    }
    apply_env(&mut loaded, &variables);
    loaded
}

fn apply_file(loaded: &mut LoadedConfig, path: &Path) {
    let name = path.display();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => {
            loaded
                .warnings
                .push(format!("{name}: can't be read ({error}); using defaults"));
            return;
        }
    };
    let table: toml::Table = match text.parse() {
        Ok(table) => table,
        Err(error) => {
            let message = error.to_string().replace('\n', "\n  ");
            loaded.warnings.push(format!(
                "{name}: not valid TOML, using defaults:\n  {message}"
            ));
            return;
        }
    };
    for (section, value) in &table {
        let toml::Value::Table(keys) = value else {
            loaded.warnings.push(format!(
                "{name}: `{section}` should be a [section] of keys; ignored"
            ));
            continue;
        };
        for (key, value) in keys {
            if let Err(problem) = loaded.config.apply(section, key, value) {
                loaded.warnings.push(format!(
                    "{name}: key `{section}.{key}`: {problem}; using the default"
                ));
            }
        }
    }
}

/// `CUBERT_*` variables that are read where they act, not settings: the kernel dump
/// (`CUBERT_KERNEL_DUMP=dir`, every generated kernel's source written to `dir`) and the
/// knobs of the test suites (how far a sweep or a model-based test goes, and the markers a
/// test sets for the child process it starts).
pub const DIAGNOSTIC_VARIABLES: [&str; 12] = [
    "CUBERT_KERNEL_DUMP",
    "CUBERT_F32_STRIDE",
    "CUBERT_F32_OFFSET",
    "CUBERT_F32_FIRST",
    "CUBERT_F32_LAST",
    "CUBERT_F64_COUNT",
    "CUBERT_LEAK_CYCLES",
    "CUBERT_MODEL_SEED",
    "CUBERT_OOM_MODEL_OPERATIONS",
    "CUBERT_TEST_CACHE_CHILD",
    "CUBERT_TEST_CACHE_TAG",
    "CUBERT_TEST_FAULT_CHILD",
];

fn apply_env(loaded: &mut LoadedConfig, env: &[(String, String)]) {
    for (name, raw) in env {
        let Some(rest) = name.strip_prefix("CUBERT_") else {
            continue;
        };
        // CUBERT_CONFIG names the file; the launcher's variables (CUBERT_RANK...) describe
        // a process group, not settings.
        if rest == "CONFIG"
            || crate::distributed::LAUNCH_VARIABLES.contains(&name.as_str())
            || DIAGNOSTIC_VARIABLES.contains(&name.as_str())
        {
            continue;
        }
        let rest = rest.to_ascii_lowercase();
        let Some((section, key)) = setting_of(&rest) else {
            loaded.warnings.push(format!(
                "{name}: not a CUBERT_<SECTION>_<KEY> variable; ignored"
            ));
            continue;
        };
        let value = parse_env_value(raw);
        if let Err(problem) = loaded.config.apply(section, key, &value) {
            loaded.warnings.push(format!(
                "{name}={raw}: key `{section}.{key}`: {problem}; ignored"
            ));
        }
    }
}

/// The `(section, key)` a variable name names, without `CUBERT_` and in lower case: a
/// section of the schema, `_`, then the key (which may hold `_` itself). A first word that
/// is no section is still split off, so the warning names the unknown section.
fn setting_of(rest: &str) -> Option<(&str, &str)> {
    if rest == "backend" {
        // Short form for the most common switch.
        return Some(("runtime", "backend"));
    }
    CubertConfig::sections()
        .iter()
        .find_map(|section| {
            let key = rest.strip_prefix(section)?.strip_prefix('_')?;
            Some((*section, key))
        })
        .or_else(|| rest.split_once('_'))
}

/// An environment value as TOML: integers and booleans as such, anything else as a string.
fn parse_env_value(raw: &str) -> toml::Value {
    let trimmed = raw.trim();
    if let Ok(integer) = trimmed.parse::<i64>() {
        return toml::Value::Integer(integer);
    }
    match trimmed {
        "true" => toml::Value::Boolean(true),
        "false" => toml::Value::Boolean(false),
        _ => toml::Value::String(trimmed.to_string()),
    }
}

static GLOBAL: OnceLock<CubertConfig> = OnceLock::new();

/// The process-wide configuration, loaded on first use. Its warnings are logged (and
/// printed to standard error when no logger is installed).
pub fn global_config() -> &'static CubertConfig {
    GLOBAL.get_or_init(|| {
        let loaded = load_config();
        report_warnings(&loaded.warnings);
        loaded.config
    })
}

/// Sets the process-wide configuration before anything reads it.
///
/// # Errors
/// Returns `config` back if the configuration was already loaded.
pub fn set_global_config(config: CubertConfig) -> Result<(), Box<CubertConfig>> {
    GLOBAL.set(config).map_err(Box::new)
}

/// Logs configuration warnings as `tracing` events; prints them to standard error if
/// neither a `tracing` subscriber nor a `log` logger is listening.
pub fn report_warnings(warnings: &[String]) {
    for warning in warnings {
        if tracing::dispatcher::has_been_set() || log::max_level() >= log::LevelFilter::Warn {
            tracing::warn!("cubert config: {warning}");
        } else {
            eprintln!("cubert: warning: {warning}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DeviceHandleMode, ProfileLevel, RuntimeConfig};

    fn write(dir: &Path, text: &str) {
        std::fs::write(dir.join(CONFIG_FILE_NAME), text).unwrap();
    }

    #[test]
    fn file_is_found_in_a_parent_directory() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "[cpu]\ndevices = 3\n");
        let nested = root.path().join("a/b");
        std::fs::create_dir_all(&nested).unwrap();
        let loaded = load_config_from(&nested, Vec::<(String, String)>::new());
        assert_eq!(loaded.config.cpu.devices, 3);
        assert_eq!(loaded.file, Some(root.path().join(CONFIG_FILE_NAME)));
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }

    #[test]
    fn malformed_file_warns_with_file_and_position_and_uses_defaults() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "[cpu\ndevices = 3\n");
        let loaded = load_config_from(root.path(), Vec::<(String, String)>::new());
        assert_eq!(loaded.config, CubertConfig::default());
        assert_eq!(loaded.warnings.len(), 1);
        assert!(
            loaded.warnings[0].contains(CONFIG_FILE_NAME),
            "{:?}",
            loaded.warnings
        );
    }

    #[test]
    fn bad_key_warns_with_file_and_key_and_keeps_the_rest() {
        let root = tempfile::tempdir().unwrap();
        write(
            root.path(),
            "[cpu]\ndevices = \"many\"\nthreads = 2\n[profiling]\nlevel = \"basic\"\n",
        );
        let loaded = load_config_from(root.path(), Vec::<(String, String)>::new());
        assert_eq!(loaded.config.cpu.devices, 1);
        assert_eq!(loaded.config.cpu.threads, 2);
        assert_eq!(loaded.config.profiling.level, ProfileLevel::Basic);
        assert_eq!(loaded.warnings.len(), 1);
        let warning = &loaded.warnings[0];
        assert!(
            warning.contains(CONFIG_FILE_NAME) && warning.contains("cpu.devices"),
            "{warning}"
        );
    }

    #[test]
    fn environment_overrides_the_file() {
        let root = tempfile::tempdir().unwrap();
        write(
            root.path(),
            "[cpu]\ndevices = 3\n[runtime]\ndevice_handle = \"threaded\"\n",
        );
        let env = vec![
            ("CUBERT_CPU_DEVICES".to_string(), "5".to_string()),
            (
                "CUBERT_RUNTIME_DEVICE_HANDLE".to_string(),
                "inline".to_string(),
            ),
            (
                "CUBERT_MEMORY_SMALL_SEGMENT".to_string(),
                "4 MiB".to_string(),
            ),
            ("CUBERT_BACKEND".to_string(), "cuda".to_string()),
            ("UNRELATED".to_string(), "x".to_string()),
        ];
        let loaded = load_config_from(root.path(), env);
        assert_eq!(loaded.config.cpu.devices, 5);
        assert_eq!(
            loaded.config.runtime.device_handle,
            DeviceHandleMode::Inline
        );
        assert_eq!(loaded.config.memory.small_segment, 4 << 20);
        assert_eq!(loaded.config.runtime.backend, "cuda");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }

    #[test]
    fn stream_keys_take_their_choices_and_range_and_warn_otherwise() {
        use crate::stream::{StreamPolicy, StreamPriority};
        let root = tempfile::tempdir().unwrap();
        std::fs::write(
            root.path().join(CONFIG_FILE_NAME),
            "[runtime]\nstream_policy = \"per_task\"\nmax_streams = 64\n",
        )
        .unwrap();
        let env = vec![(
            "CUBERT_RUNTIME_STREAM_PRIORITY".to_string(),
            "high".to_string(),
        )];
        let loaded = load_config_from(root.path(), env);
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let runtime = &loaded.config.runtime;
        assert_eq!(runtime.stream_policy, StreamPolicy::PerTask);
        assert_eq!(runtime.max_streams, 64);
        assert_eq!(runtime.stream_priority, StreamPriority::High);
        for (key, value) in [
            ("CUBERT_RUNTIME_STREAM_POLICY", "per_core"),
            ("CUBERT_RUNTIME_MAX_STREAMS", "0"),
            ("CUBERT_RUNTIME_MAX_STREAMS", "65"),
            ("CUBERT_RUNTIME_STREAM_PRIORITY", "urgent"),
        ] {
            let empty = tempfile::tempdir().unwrap();
            let loaded = load_config_from(empty.path(), vec![(key.to_string(), value.to_string())]);
            assert_eq!(
                loaded.warnings.len(),
                1,
                "{key}={value}: {:?}",
                loaded.warnings
            );
            assert!(loaded.warnings[0].contains(key), "{:?}", loaded.warnings);
            assert_eq!(
                loaded.config.runtime,
                RuntimeConfig::default(),
                "{key}={value}"
            );
        }
        let empty = tempfile::tempdir().unwrap();
        let loaded = load_config_from(
            empty.path(),
            vec![(
                "CUBERT_RUNTIME_STREAM_POLICY".to_string(),
                "per_core".to_string(),
            )],
        );
        assert!(
            loaded.warnings[0].contains("per_thread") && loaded.warnings[0].contains("single"),
            "the warning lists the policies: {:?}",
            loaded.warnings
        );
    }

    #[test]
    fn backend_accepts_auto_and_warns_on_an_unknown_name() {
        let root = tempfile::tempdir().unwrap();
        let env = vec![("CUBERT_BACKEND".to_string(), "auto".to_string())];
        let loaded = load_config_from(root.path(), env);
        assert_eq!(loaded.config.runtime.backend, "auto");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let env = vec![("CUBERT_BACKEND".to_string(), "tpu".to_string())];
        let loaded = load_config_from(root.path(), env);
        assert_eq!(loaded.config.runtime.backend, "cpu", "the default stays");
        assert!(
            loaded.warnings.iter().any(|w| w.contains("auto")),
            "the warning lists the choices: {:?}",
            loaded.warnings
        );
    }

    /// Loads the configuration with each of `names` set to `value` and checks that none is
    /// taken for a setting: no warning, every setting at its default.
    fn assert_not_settings(names: &[&str], value: &str) {
        let root = tempfile::tempdir().unwrap();
        let env: Vec<(String, String)> = names
            .iter()
            .map(|name| (name.to_string(), value.to_string()))
            .collect();
        let loaded = load_config_from(root.path(), env);
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(loaded.config, CubertConfig::default());
    }

    #[test]
    fn launcher_variables_are_not_settings() {
        assert_not_settings(&crate::distributed::LAUNCH_VARIABLES, "1");
    }

    #[test]
    fn diagnostic_variables_are_not_settings() {
        assert_not_settings(&DIAGNOSTIC_VARIABLES, "7");
        let root = tempfile::tempdir().unwrap();
        // A misspelling of one is still named.
        let env = vec![("CUBERT_KERNEL_DUMPS".to_string(), "/tmp".to_string())];
        let loaded = load_config_from(root.path(), env);
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    }

    #[test]
    fn bad_environment_value_warns_with_variable_name() {
        let root = tempfile::tempdir().unwrap();
        let env = vec![("CUBERT_CPU_DEVICES".to_string(), "0".to_string())];
        let loaded = load_config_from(root.path(), env);
        assert_eq!(loaded.config.cpu.devices, 1);
        assert!(loaded.warnings[0].contains("CUBERT_CPU_DEVICES"));
    }

    #[test]
    fn copy_threads_take_counts_up_to_256_and_warn_above() {
        let root = tempfile::tempdir().unwrap();
        let set = |value: &str| {
            load_config_from(
                root.path(),
                vec![("CUBERT_CUDA_COPY_THREADS".to_string(), value.to_string())],
            )
        };
        assert_eq!(set("16").config.cuda.copy_threads, 16);
        let refused = set("1000");
        assert_eq!(refused.config.cuda.copy_threads, 0);
        assert!(
            refused.warnings[0].contains("0 to 256"),
            "{:?}",
            refused.warnings
        );
    }

    /// Every key of the schema is reached by its `CUBERT_<SECTION>_<KEY>` variable: a value
    /// it refuses is reported under that key, one it takes changes the configuration.
    #[test]
    fn every_key_has_its_environment_variable() {
        let root = tempfile::tempdir().unwrap();
        for (section, key) in CubertConfig::keys() {
            let name = format!("CUBERT_{section}_{key}").to_ascii_uppercase();
            let loaded = load_config_from(root.path(), vec![(name.clone(), "x!".to_string())]);
            match loaded.warnings.as_slice() {
                [] => assert_ne!(loaded.config, CubertConfig::default(), "{name}"),
                [warning] => assert!(
                    warning.contains(&format!("key `{section}.{key}`"))
                        && !warning.contains("unknown"),
                    "{warning}"
                ),
                warnings => panic!("{name}: {warnings:?}"),
            }
        }
    }
}
