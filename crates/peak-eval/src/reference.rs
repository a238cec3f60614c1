//! Reference outputs: what the reference context (in a workflow, the initial kernel)
//! computes for one input configuration and one data seed, recorded once and kept on disk.
//!
//! Entries are content-addressed by (reference source hash, inputs, data seed, device), so
//! every candidate of a workflow, and every later validation, reuses them. An entry is a
//! folder written under a temporary name and renamed into place, holding `meta.json` and
//! one raw little-endian file per output array; each file's SHA-256 is checked before use
//! and a damaged entry is recorded again rather than trusted.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use peak_backend::RunOptions;
use peak_backend::worker::{Job, OutputMode, WorkerPool, output_file};
use peak_spec::{Context, DType, ExecParams, HostArray};
use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::hash::{canonical, device_identity, key, sha256_hex, source_hash};
use crate::workers::absolute;

const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceMeta {
    pub format: u32,
    pub key: String,
    /// Where the reference context was when this was recorded (for people; not part of the key).
    pub context: String,
    pub source_hash: String,
    pub device: String,
    pub inputs: IndexMap<String, i64>,
    pub data_seed: u64,
    /// The reference's own execution parameter that produced the outputs.
    pub params: ExecParams,
    pub arrays: Vec<ReferenceArrayMeta>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceArrayMeta {
    pub name: String,
    pub dtype: DType,
    pub elements: usize,
    pub sha256: String,
}

/// A reference ready for comparison.
#[derive(Debug, Clone)]
pub struct Reference {
    pub meta: ReferenceMeta,
    pub dir: PathBuf,
    /// True when it was recorded now rather than found on disk.
    pub recorded: bool,
    /// True when a damaged entry was found and recorded again.
    pub repaired: bool,
}

impl Reference {
    pub fn path(&self, array: &str) -> PathBuf {
        output_file(&self.dir, array)
    }

    pub fn load(&self, array: &str) -> Result<HostArray, EvalError> {
        let meta = self.meta.arrays.iter().find(|a| a.name == array).ok_or_else(|| EvalError::Replay(format!("the reference has no array {array}")))?;
        let path = self.path(array);
        let bytes = std::fs::read(&path).map_err(|e| EvalError::io(&path, e))?;
        Ok(HostArray { dtype: meta.dtype, bytes })
    }
}

pub struct ReferenceStore {
    dir: PathBuf,
}

impl ReferenceStore {
    pub fn new(dir: impl Into<PathBuf>) -> ReferenceStore {
        ReferenceStore { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The reference outputs for `inputs` and `data_seed`, from disk or recorded now by
    /// running the reference in `pool` (which must run the reference's backend).
    pub fn get_or_record(&self, pool: &mut WorkerPool, reference: &Context, inputs: &IndexMap<String, i64>, data_seed: u64) -> Result<Reference, EvalError> {
        let source = source_hash(reference);
        let device = device_identity(pool.device());
        let entry_key = key(&["peak-reference-v1", &source, &canonical(inputs), &data_seed.to_string(), &device]);
        let entry = self.dir.join(&entry_key[..2]).join(&entry_key);
        let mut repaired = false;
        if entry.exists() {
            match verify(&entry, &entry_key) {
                Ok(meta) => return Ok(Reference { meta, dir: entry, recorded: false, repaired: false }),
                Err(_) => {
                    repaired = true;
                    std::fs::remove_dir_all(&entry).map_err(|e| EvalError::io(&entry, e))?;
                }
            }
        }

        let params = reference_point(reference, inputs)?;
        let parent = entry.parent().expect("entry has a parent");
        std::fs::create_dir_all(parent).map_err(|e| EvalError::io(parent, e))?;
        let staging = tempfile::Builder::new().prefix(".staging-").tempdir_in(parent).map_err(|e| EvalError::io(parent, e))?;
        // The worker writes the outputs straight into the staging folder: a reference can
        // be hundreds of megabytes, which should not cross the pipe as text.
        let options = RunOptions { warmup: 0, repetitions: 0, data_seed, ..RunOptions::default() };
        let job = Job { outputs: OutputMode::Files { dir: staging.path().to_path_buf() }, ..Job::new(absolute(&reference.dir), params.clone(), options) };
        let report = pool.run(job)?.map_err(|f| EvalError::ReferenceFailed {
            reference: reference.dir.display().to_string(),
            params: params.to_string(),
            failure: f.to_string(),
        })?;
        let mut arrays = Vec::new();
        for output in &report.outputs {
            if let Some(error) = &output.compare_error {
                return Err(EvalError::ReferenceFailed { reference: reference.dir.display().to_string(), params: params.to_string(), failure: error.clone() });
            }
            let file = output_file(staging.path(), &output.name);
            let bytes = std::fs::read(&file).map_err(|e| EvalError::io(&file, e))?;
            if bytes.len() != output.elements * output.dtype.size_bytes() {
                return Err(EvalError::ReferenceFailed {
                    reference: reference.dir.display().to_string(),
                    params: params.to_string(),
                    failure: format!(
                        "the worker wrote {} bytes for output {}, expected {}",
                        bytes.len(),
                        output.name,
                        output.elements * output.dtype.size_bytes()
                    ),
                });
            }
            arrays.push(ReferenceArrayMeta { name: output.name.clone(), dtype: output.dtype, elements: output.elements, sha256: sha256_hex(&bytes) });
        }
        let meta = ReferenceMeta {
            format: FORMAT,
            key: entry_key.clone(),
            context: reference.dir.display().to_string(),
            source_hash: source,
            device,
            inputs: inputs.clone(),
            data_seed,
            params,
            arrays,
        };
        let meta_path = staging.path().join("meta.json");
        std::fs::write(&meta_path, serde_json::to_string_pretty(&meta).expect("meta serializes")).map_err(|e| EvalError::io(&meta_path, e))?;
        let staged = staging.keep();
        if std::fs::rename(&staged, &entry).is_err() {
            // Another process recorded the same entry meanwhile; theirs is as good as ours.
            let _ = std::fs::remove_dir_all(&staged);
        }
        Ok(Reference { meta, dir: entry, recorded: true, repaired })
    }
}

fn verify(entry: &Path, entry_key: &str) -> Result<ReferenceMeta, String> {
    let text = std::fs::read_to_string(entry.join("meta.json")).map_err(|e| e.to_string())?;
    let meta: ReferenceMeta = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    if meta.format != FORMAT || meta.key != entry_key {
        return Err("foreign entry".into());
    }
    for array in &meta.arrays {
        let bytes = std::fs::read(output_file(entry, &array.name)).map_err(|e| e.to_string())?;
        if bytes.len() != array.elements * array.dtype.size_bytes() || sha256_hex(&bytes) != array.sha256 {
            return Err(format!("{} is damaged", array.name));
        }
    }
    Ok(meta)
}

/// The reference's execution parameter for a candidate's inputs: the same inputs, and
/// the reference's first valid tuning.
pub fn reference_point(reference: &Context, inputs: &IndexMap<String, i64>) -> Result<ExecParams, EvalError> {
    let mut space = reference.space();
    let incompatible =
        |message: String| EvalError::IncompatibleReference { reference: reference.dir.display().to_string(), candidate: "the candidate".into(), message };
    for name in inputs.keys() {
        if space.values(name).is_none() {
            return Err(incompatible(format!("it has no input named '{name}'")));
        }
    }
    // Moved, not restricted: the reference's named shapes need not hold the candidate's size.
    let moves: Vec<(String, Vec<i64>)> = inputs.iter().map(|(n, v)| (n.clone(), vec![*v])).collect();
    space.move_inputs(&moves).map_err(|e| incompatible(e.to_string()))?;
    space.iter().next().ok_or_else(|| incompatible(format!("no valid execution parameter of the reference has inputs {}", canonical(inputs))))
}

/// Two contexts must fill the same arrays the same way, or "same inputs" means nothing.
pub fn check_compatible(candidate: &Context, reference: &Context) -> Result<(), EvalError> {
    let fail = |message: String| EvalError::IncompatibleReference {
        reference: reference.dir.display().to_string(),
        candidate: candidate.dir.display().to_string(),
        message,
    };
    let (c, r) = (&candidate.manifest.arrays, &reference.manifest.arrays);
    if c.len() != r.len() {
        return Err(fail(format!("the candidate declares {} arrays, the reference {}", c.len(), r.len())));
    }
    for (a, b) in c.iter().zip(r) {
        if (&a.name, a.dtype, a.init, a.seed, a.output, &a.size) != (&b.name, b.dtype, b.init, b.seed, b.output, &b.size) {
            return Err(fail(format!(
                "array {} differs: candidate {} size `{}` init {:?} seed {:?} output {}, reference {} {} size `{}` init {:?} seed {:?} output {}",
                a.name, a.dtype, a.size, a.init, a.seed, a.output, b.name, b.dtype, b.size, b.init, b.seed, b.output
            )));
        }
    }
    for name in candidate.manifest.inputs.keys() {
        if !reference.manifest.inputs.contains_key(name) {
            return Err(fail(format!("the reference has no input named '{name}'")));
        }
    }
    Ok(())
}
